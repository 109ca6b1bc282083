# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a model's files into the page cache before the old engine stops, where memory allows. Standard library.

    page_cache_warm.py [--max-fraction 0.5] [--evict] DIR [DIR ...]

Reads every regular file under each DIR (sequential 8 MiB reads; links are not followed: a model folder the
model_weights role made holds real files) when their total is at most --max-fraction of MemAvailable
(/proc/meminfo), so the warm cannot push the running engine into swap or the OOM killer. --evict drops the
files from the page cache first (posix_fadvise DONTNEED: only these files; for measuring a cold read).
Prints one JSON object: bytes, files, seconds, MiB/s, mem_available, skipped (the reason, or null).
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import stat
import sys
import time

CHUNK = 8 << 20


def mem_available(path="/proc/meminfo"):
    with open(path) as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def model_files(folders):
    for folder in folders:
        for root, dirs, files in os.walk(folder):  # os.walk does not follow links to folders
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    yield path, st.st_size


def read_all(paths, evict):
    done = 0
    for path, _size in paths:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            if evict and hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                continue
            while True:
                data = os.read(fd, CHUNK)
                if not data:
                    break
                done += len(data)
        finally:
            os.close(fd)
    return done


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--max-fraction", type=float, default=0.5)
    parser.add_argument("--evict", action="store_true")
    args = parser.parse_args(argv)
    missing = [f for f in args.folders if not os.path.isdir(f)]
    if missing:
        print(json.dumps({"skipped": "no such folder: %s" % ", ".join(missing), "bytes": 0}))
        return 0
    paths = list(model_files(args.folders))
    total = sum(size for _path, size in paths)
    available = mem_available()
    result = {"files": len(paths), "bytes": total, "mem_available": available, "skipped": None,
              "seconds": 0.0, "mib_per_s": None}
    if args.evict:
        read_all(paths, evict=True)
        result["skipped"] = "evicted (no read)"
    elif total > args.max_fraction * available:
        result["skipped"] = "%d bytes of model files > %.2f x MemAvailable %d: not warmed" % (
            total, args.max_fraction, available)
    else:
        started = time.time()
        read_all(paths, evict=False)
        result["seconds"] = round(time.time() - started, 3)
        if result["seconds"] > 0:
            result["mib_per_s"] = round(total / 1048576.0 / result["seconds"], 1)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
