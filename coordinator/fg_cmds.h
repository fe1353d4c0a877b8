/* fg_cmds.h - the coordinator's subcommands. Each lives in its own
 * cmd_<name>.c, takes argv after the subcommand name, and returns the process
 * exit status (0 ok, 1 runtime failure, 2 bad usage or input). */
#ifndef FG_CMDS_H
#define FG_CMDS_H

int fg_cmd_run(int argc, char **argv);
int fg_cmd_tokenize(int argc, char **argv);
int fg_cmd_profile(int argc, char **argv);
int fg_cmd_policy(int argc, char **argv);

#endif
