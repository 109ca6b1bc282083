# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the TEST STAND-IN for vLLM: a tiny wheel `gpufleet-vllm-standin` (no network, stdlib only).

It stands in for the ~4.6 GB vLLM distribution in the vllm_lifecycle Molecule scenario, where the
role's version switch, rollback and health gate are tested. It provides what the role touches:
  - the `vllm` console script, which runs tests/fakes/fake_vllm_server.py (an HTTP test double);
  - the import surface of the role's unit checker: vllm.utils.argparse_utils.FlexibleArgumentParser,
    vllm.entrypoints.common.cli_args.{make_arg_parser, validate_parsed_serve_args},
    vllm.engine.arg_utils.AsyncEngineArgs.from_cli_args (strict: unknown flags are rejected).

Usage: build_standin_wheel.py --version 0.1.0 --fake tests/fakes/fake_vllm_server.py --out DIR
"""

from __future__ import absolute_import, annotations, division, print_function

import argparse
import base64
import hashlib
import os
import zipfile

DIST = "gpufleet_vllm_standin"

FILES = {
    "vllm/__init__.py": '"""TEST STAND-IN for vLLM (gpufleet.vllm Molecule tests). Not vLLM."""\n__version__ = "{version}"\n',
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/common/__init__.py": "",
    "vllm/entrypoints/common/cli_args.py": "from vllm._fake_server import make_arg_parser, validate_parsed_serve_args  # noqa: F401\n",
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": (
        "import argparse\n\n\nclass FlexibleArgumentParser(argparse.ArgumentParser):\n"
        '    """Stand-in for vLLM\'s parser class."""\n'
    ),
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": (
        "class AsyncEngineArgs(object):\n"
        '    """Stand-in: keeps the parsed values, refuses a missing model like vLLM."""\n\n'
        "    def __init__(self, **kwargs):\n"
        "        self.__dict__.update(kwargs)\n\n"
        "    @classmethod\n"
        "    def from_cli_args(cls, args):\n"
        "        if not getattr(args, 'model', None):\n"
        "            raise ValueError('no model given')\n"
        "        return cls(**vars(args))\n"
    ),
}


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build(version, fake, out):
    files = {name: body.format(version=version).encode("utf-8") for name, body in FILES.items()}
    with open(fake, "rb") as handle:
        files["vllm/_fake_server.py"] = handle.read()
    info = "%s-%s.dist-info" % (DIST, version)
    files[info + "/METADATA"] = (
        "Metadata-Version: 2.1\nName: gpufleet-vllm-standin\nVersion: %s\n"
        "Summary: TEST STAND-IN for vLLM used by gpufleet.vllm's Molecule tests (not vLLM)\n" % version
    ).encode("utf-8")
    files[info + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: gpufleet-build-standin\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[info + "/entry_points.txt"] = b"[console_scripts]\nvllm = vllm._fake_server:main\n"
    record = [_record_line(name, data) for name, data in sorted(files.items())]
    record.append(info + "/RECORD,,")
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode("utf-8")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "%s-%s-py3-none-any.whl" % (DIST, version))
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as wheel:
        for name in sorted(files):
            info_z = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible bytes
            info_z.external_attr = 0o644 << 16
            wheel.writestr(info_z, files[name])
    os.replace(path + ".tmp", path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--fake", required=True)
    parser.add_argument("--out", required=True)
    opts = parser.parse_args()
    print(build(opts.version, opts.fake, opts.out))


if __name__ == "__main__":
    main()
