#!/usr/bin/python3
"""Write broken variants of a good single-file safetensors OPT checkpoint, one
directory per defect, for testing that the C loader refuses each one with a
clear message (exit 2) instead of crashing or reading garbage.

  corrupt.py --src GOOD_DIR --out OUT_DIR

GOOD_DIR holds config.json + model.safetensors (as make_checkpoint.py writes).
Creates OUT_DIR/<defect>/ (a full copy with one defect) and prints the list,
one "<dir>\t<what is broken>" per line.
"""
import argparse
import json
import os
import shutil
import struct

ST = "model.safetensors"


def read_st(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_st(path, header, data):
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    src_st = os.path.join(a.src, ST)
    raw = open(src_st, "rb").read()
    header, data = read_st(src_st)
    (hlen,) = struct.unpack("<Q", raw[:8])
    cfg = json.load(open(os.path.join(a.src, "config.json")))
    names = [k for k in header if k != "__metadata__"]
    by_off = sorted(names, key=lambda k: header[k]["data_offsets"][0])
    first, second = by_off[0], by_off[1]
    fc1 = next(k for k in names if k.endswith("layers.0.fc1.weight"))
    bias = next(k for k in names if k.endswith("layers.0.fc2.bias"))
    made = []

    def variant(name, what, st_bytes=None, st_header=None, config_text=None):
        d = os.path.join(a.out, name)
        if os.path.exists(d):
            shutil.rmtree(d)
        shutil.copytree(a.src, d)
        if st_header is not None:
            write_st(os.path.join(d, ST), st_header, data)
        elif st_bytes is not None:
            open(os.path.join(d, ST), "wb").write(st_bytes)
        if config_text is not None:
            open(os.path.join(d, "config.json"), "w").write(config_text)
        made.append((d, what))

    def hdr_with(key, **changes):
        h = json.loads(json.dumps(header))
        h[key].update(changes)
        return h

    variant("truncated", "model.safetensors cut to half its size (data ends early)",
            st_bytes=raw[:len(raw) // 2])
    variant("truncated_in_header", "model.safetensors cut inside the JSON header",
            st_bytes=raw[:8 + 20])
    variant("empty_file", "model.safetensors is 0 bytes", st_bytes=b"")
    variant("header_len_past_eof", "8-byte header length points past the end of the file",
            st_bytes=struct.pack("<Q", len(raw) + 4096) + raw[8:])
    variant("header_len_huge", "8-byte header length is 2^63 (overflow bait)",
            st_bytes=struct.pack("<Q", 1 << 63) + raw[8:])
    variant("header_not_json", "header bytes are not JSON",
            st_bytes=raw[:8] + b"{not json".ljust(hlen) + raw[8 + hlen:])
    b0, e0 = header[first]["data_offsets"]
    b1, e1 = header[second]["data_offsets"]
    variant("overlapping_offsets", "%s data_offsets overlap %s's" % (second, first),
            st_header=hdr_with(second, data_offsets=[b0 + 2, b0 + 2 + (e1 - b1)]))
    variant("offsets_out_of_range", "%s data_offsets end past the data buffer" % second,
            st_header=hdr_with(second, data_offsets=[len(data) - 2, len(data) - 2 + (e1 - b1)]))
    variant("offsets_reversed", "%s data_offsets begin > end" % second,
            st_header=hdr_with(second, data_offsets=[e1, b1]))
    variant("dtype_i32", "%s declared dtype I32 (an integer type)" % bias,
            st_header=hdr_with(bias, dtype="I32"))
    variant("dtype_unknown", "%s declared dtype \"Q7\" (not a safetensors dtype)" % bias,
            st_header=hdr_with(bias, dtype="Q7"))
    shp = header[bias]["shape"]
    variant("shape_bytes_mismatch", "%s shape %s while its bytes hold %s"
            % (bias, [shp[0] + 1], shp), st_header=hdr_with(bias, shape=[shp[0] + 1]))
    f_, h_ = header[fc1]["shape"]
    variant("shape_vs_config", "%s shape [%d, %d] (transposed: bytes match, config does not)"
            % (fc1, h_, f_), st_header=hdr_with(fc1, shape=[h_, f_]))
    h = json.loads(json.dumps(header))
    del h[bias]
    variant("missing_tensor", "%s absent from the header" % bias, st_header=h)
    variant("config_not_json", "config.json is not JSON", config_text="{\"hidden_size\": 64,,\n")
    c = dict(cfg, hidden_size="big")
    variant("config_wrong_type", "config.json hidden_size is the string \"big\"",
            config_text=json.dumps(c, indent=2))
    c = dict(cfg)
    del c["num_hidden_layers"]
    variant("config_missing_field", "config.json has no num_hidden_layers",
            config_text=json.dumps(c, indent=2))
    c = dict(cfg, num_attention_heads=cfg["hidden_size"] + 1)
    variant("config_heads_not_divisor", "config.json num_attention_heads does not divide hidden_size",
            config_text=json.dumps(c, indent=2))
    c = dict(cfg, num_hidden_layers=cfg["num_hidden_layers"] + 1)
    variant("config_more_layers", "config.json asks for one layer more than the file holds",
            config_text=json.dumps(c, indent=2))
    # sizes past the bounds the workers accept (found by fuzz/fuzz_config.c)
    c = dict(cfg, vocab_size=5027268)
    variant("config_vocab_huge", "config.json vocab_size 5027268, past 2^20",
            config_text=json.dumps(c, indent=2))
    c = dict(cfg, num_hidden_layers=1 << 30)
    variant("config_layers_huge", "config.json num_hidden_layers 2^30",
            config_text=json.dumps(c, indent=2))
    for d, what in made:
        print("%s\t%s" % (d, what))


if __name__ == "__main__":
    main()
