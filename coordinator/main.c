/* main.c - the `flexgen` coordinator's entry point: dispatches subcommands.
 * Everything a subcommand does lives in its cmd_<name>.c. */
#include <stdio.h>
#include <string.h>

#include "fg_cmds.h"
#include "fg_common.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} fg_cmd;

static const fg_cmd cmds[] = {
    {"run", fg_cmd_run, "generate text for a file of prompts"},
    {"policy", fg_cmd_policy, "the placement and batch sizes the cost model picks, and why"},
    {"profile", fg_cmd_profile, "measure every tier (each worker alone) for the cost model"},
    {"tokenize", fg_cmd_tokenize, "text on stdin -> token ids (or ids -> text with --decode)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: flexgen <command> [options]\n\n"
               "FlexGen in C: high-throughput offline generation with OPT and Llama-family models whose\n"
               "weights and KV cache are spread over GPU, CPU and disk.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
    fprintf(f, "\n'flexgen <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv) {
    fg_log_init("coordinator");
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "flexgen: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
