# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads.

ansible-test creates virtual environments without pip and then fetches a get-pip script from a host
that is not reachable from these machines. This stand-in is saved where ansible-test looks for its
cached copy: it bootstraps pip from the interpreter's own ensurepip, then installs what was asked
for from the configured package index.
"""
import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--upgrade"] + args)
