# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# FAKE nvidia-smi (test double, gpufleet.vllm): only `--gpu-reset -i N` / `-r -i N`, over the FAKE pynvml
# state file. A reset applies the pending MIG mode, unless a live process holds the GPU (as the real one
# refuses). Every reset is logged to /var/lib/fake_nvml/resets.log.
import os
import sys

import pynvml  # the FAKE pynvml installed next to it

args = sys.argv[1:]
if len(args) == 3 and args[0] in ("-r", "--gpu-reset") and args[1] == "-i":
    fake = pynvml._default()
    fake._reload()
    index = int(args[2])
    gpu = fake.state["gpus"][index]
    holders = fake._live_processes(index, gpu)
    if holders:
        sys.stdout.write("GPU %s is currently in use by another process (%s).\n\n1 device is currently being used "
                         "by one or more other processes (e.g., Fabric Manager, CUDA application, graphics "
                         "application such as an X server, or a monitoring application such as another instance "
                         "of nvidia-smi). Please first kill all processes using this device and all compute "
                         "applications running in the system.\n" % (gpu["pci_bus_id"], ", ".join(
                             str(p["pid"]) for p in holders)))
        sys.exit(255)
    if gpu.get("mig") is not None:
        gpu["mig"][0] = gpu["mig"][1]
        if gpu["mig"][0] == 0:
            gpu["mig_devices"] = []
    fake._save()
    os.makedirs("/var/lib/fake_nvml", exist_ok=True)
    with open("/var/lib/fake_nvml/resets.log", "a") as log:
        log.write("%d\n" % index)
    sys.stdout.write("GPU %s was successfully reset.\nAll done.\n" % gpu["pci_bus_id"])
    sys.exit(0)
sys.stderr.write("fake nvidia-smi: only '--gpu-reset -i N' is implemented (got %s)\n" % " ".join(args))
sys.exit(2)
