# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep only one GPU architecture's kernels in the CUDA fat binaries of ELF shared objects.

    fatbin_strip.py --arch 90 FILE.so [FILE.so ...]     rewrite in place, print what was kept
    fatbin_strip.py --arch 90 --list FILE.so            print the entries, change nothing

A CUDA extension carries, in its ELF section ``.nv_fatbin``, one fat-binary container per
translation unit: a 16-byte header (magic 0xBA55ED50, version, header size, payload size) and
entries, each a header (kind 1 = PTX, 2 = cubin; header size; payload size; the target
architecture at byte 28) and its payload. The driver picks, for a GPU of compute capability 9.0,
a cubin built for sm_90 (sm_90a included: same number), else the newest PTX not above 9.0 to
compile at load time. This tool keeps exactly those entries in each container and drops the rest
(cubins for sm_75/80/86/89/100/120, and all PTX where a cubin for the architecture exists): the kept
entries move to the container's start, its payload size shrinks, and the freed bytes are zeroed,
so the file keeps its size and every address (the .nvFatBinSegment wrappers point at container
starts) while xz packs the zeros away. Check the result with ``cuobjdump --list-elf --list-ptx``.
"""

from __future__ import annotations

import argparse
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_CUBIN = 1, 2


class FatbinError(Exception):
    pass


def section(data, wanted):
    """(offset, size) of the ELF64 little-endian section named `wanted`, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise FatbinError("not an ELF64 little-endian file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    for name, _type, _flags, _addr, offset, size in headers:
        end = data.index(b"\0", strtab + name)
        if data[strtab + name:end].decode("ascii", "replace") == wanted:
            return offset, size
    return None


def entries(data, start):
    """The container at `start`: (its end, [(offset, length, kind, arch), ...])."""
    magic, _version, header_size, payload = struct.unpack_from("<IHHQ", data, start)
    if magic != FATBIN_MAGIC:
        raise FatbinError("no fat-binary header at offset %d" % start)
    pos, end, found = start + header_size, start + header_size + payload, []
    while pos < end:
        kind, _ver, ehsize, esize = struct.unpack_from("<HHIQ", data, pos)
        arch, = struct.unpack_from("<I", data, pos + 28)
        found.append((pos, ehsize + esize, kind, arch))
        pos += ehsize + esize
    if pos != end:
        raise FatbinError("container at %d: entries overrun its size (%d != %d)" % (start, pos, end))
    return end, found


def containers(data, offset, size):
    """Every container of the section, as (start, end, entries); zero padding between them is skipped."""
    pos, stop, out = offset, offset + size, []
    while pos < stop:
        if struct.unpack_from("<I", data, pos)[0] != FATBIN_MAGIC:
            if any(data[pos:pos + 8]):
                raise FatbinError("unexpected bytes at offset %d between containers" % pos)
            pos += 8
            continue
        end, found = entries(data, pos)
        out.append((pos, end, found))
        pos = end
    return out


def choose(found, arch):
    """What the driver would load on a GPU of `arch`: the cubins for it, else the newest PTX <= arch."""
    cubins = [e for e in found if e[2] == KIND_CUBIN and e[3] == arch]
    ptx = [e for e in found if e[2] == KIND_PTX and e[3] <= arch]
    if cubins:
        return cubins
    newest = max((e[3] for e in ptx), default=None)
    return [e for e in ptx if e[3] == newest]


def strip_container(buf, start, end, found, arch):
    """Rewrite one container in `buf` (a bytearray) with only the chosen entries; returns bytes kept."""
    keep = choose(found, arch)
    header_size, = struct.unpack_from("<H", buf, start + 6)
    blob = b"".join(bytes(buf[off:off + length]) for off, length, _k, _a in keep)
    first = start + header_size
    buf[first:end] = blob + b"\0" * (end - first - len(blob))
    struct.pack_into("<Q", buf, start + 8, len(blob))
    return len(blob)


def strip_file(path, arch, dry_run=False):
    with open(path, "rb") as handle:
        buf = bytearray(handle.read())
    where = section(buf, ".nv_fatbin")
    if where is None:
        return {"file": path, "containers": 0, "before": 0, "after": 0}
    conts = containers(buf, *where)
    before = sum(sum(e[1] for e in found) for _s, _e, found in conts)
    after = 0
    for start, end, found in conts:
        after += sum(e[1] for e in choose(found, arch)) if dry_run else strip_container(buf, start, end, found, arch)
    if not dry_run:
        with open(path, "wb") as handle:
            handle.write(bytes(buf))
    return {"file": path, "containers": len(conts), "before": before, "after": after}


def list_file(path):
    with open(path, "rb") as handle:
        data = handle.read()
    where = section(data, ".nv_fatbin")
    for start, _end, found in containers(data, *where) if where else []:
        for off, length, kind, arch in found:
            print("%s container@%d %s sm_%d %d bytes" % (path, start, "ptx" if kind == KIND_PTX else "cubin",
                                                         arch, length))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, required=True, help="compute capability as a number: 90 for H100/H200")
    parser.add_argument("--list", action="store_true", help="list the entries, change nothing")
    parser.add_argument("--dry-run", action="store_true", help="report what would be kept, change nothing")
    parser.add_argument("files", nargs="+")
    opts = parser.parse_args(argv)
    try:
        for path in opts.files:
            if opts.list:
                list_file(path)
                continue
            r = strip_file(path, opts.arch, opts.dry_run)
            print("%s: %d containers, kernels %.1f MiB -> %.1f MiB (sm_%d)" % (
                r["file"], r["containers"], r["before"] / 2.0 ** 20, r["after"] / 2.0 ** 20, opts.arch))
    except (FatbinError, OSError, struct.error) as exc:
        sys.exit("fatbin_strip: %s: %s" % (path, exc))


if __name__ == "__main__":
    main()
