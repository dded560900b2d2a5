"""The seat: the CPUs and memory this process may use. On a shared server (a JupyterHub seat, a container) those
are a cgroup's limits, not the machine's: a seat on a 64-core node may be allowed the time of two cores and
2 GiB, and its kernel is killed, not warned, when it passes the memory limit.

The process's own cgroup is found from /proc/self/cgroup and the mounts (/proc/self/mountinfo), and the
tightest limit is taken over it and its parents: a TLJH seat is a systemd slice, not the root. Both cgroup
versions are read: v2 `cpu.max` and `memory.max`, v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us` and
`memory.limit_in_bytes`."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch

NO_LIMIT = 2**62  # cgroup v1 writes "no memory limit" as a number near 2**63
THREADS_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # a learner who set one of these chose torch's threads


def _mounts(mountinfo: Path) -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount root, mount point, super options) of every cgroup mount in a mountinfo file."""
    found = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split()
        if " - " not in line:
            continue
        after = line.split(" - ", 1)[1].split()
        if after and after[0] in ("cgroup", "cgroup2"):
            options = set(after[2].split(",")) if len(after) > 2 else set()
            found.append((after[0], fields[3], fields[4], options))
    return found


def cgroup_dirs(controller: str, proc_cgroup: Path = Path("/proc/self/cgroup"),
                mountinfo: Path = Path("/proc/self/mountinfo"), root: Path = Path("/")) -> list[Path]:
    """Folders of this process's cgroup for `controller` ('cpu' or 'memory'), from its own up to the mount's root.

    A v1 hierarchy that mounts the controller wins; else the v2 (unified) one. `root` prefixes the mount points
    (tests point it at fixture files). Empty where there is no cgroup file system (macOS, Windows)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
        mounts = _mounts(mountinfo)
    except OSError:
        return []
    for fstype, mount_root, mount_point, options in mounts:
        for line in lines:
            _, controllers, path = line.split(":", 2)
            v1 = fstype == "cgroup" and controller in controllers.split(",") and controller in options
            if v1 or (fstype == "cgroup2" and controllers == "" and not _has_v1(mounts, controller)):
                base = root / mount_point.lstrip("/")
                relative = os.path.relpath(path, mount_root)
                if relative.startswith(".."):  # a path outside the mount's root: read it from the mount
                    relative = path.lstrip("/")
                own = base if relative in (".", "") else base / relative
                if not own.is_dir():  # a cgroup namespace shows its root as "/": the mount is our own cgroup
                    own = base
                dirs = [own, *own.parents]
                return [d for d in dirs if d == base or base in d.parents]
    return []


def _has_v1(mounts: list[tuple[str, str, str, set[str]]], controller: str) -> bool:
    return any(fstype == "cgroup" and controller in options for fstype, _, _, options in mounts)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_quota(dirs: list[Path]) -> float | None:
    """Cores the tightest CPU quota over `dirs` allows (fractional), or None where there is no quota."""
    quotas = []
    for d in dirs:
        try:
            v2 = (_read(d / "cpu.max") or "max").split()
            if v2[0] != "max":
                quotas.append(int(v2[0]) / int(v2[1] if len(v2) > 1 else 100_000))
            v1 = int(_read(d / "cpu.cfs_quota_us") or -1)
            if v1 > 0:
                quotas.append(v1 / int(_read(d / "cpu.cfs_period_us") or 100_000))
        except ValueError:
            continue  # a file this reader does not understand: no quota from it
    return min(quotas) if quotas else None


def _stat(path: Path) -> dict[str, int]:
    text = _read(path) or ""
    return {k: int(v) for k, v in (line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)}


def memory_headroom(dirs: list[Path]) -> tuple[int, int] | None:
    """(limit, bytes still free under it) of the tightest cgroup memory limit over `dirs`, or None with no limit.

    In use means the cgroup's usage less its inactive file cache, which the kernel reclaims before it kills."""
    tightest = None
    for d in dirs:
        for limit_file, usage_file, inactive in (("memory.max", "memory.current", "inactive_file"),
                                                 ("memory.limit_in_bytes", "memory.usage_in_bytes",
                                                  "total_inactive_file")):
            limit = _read(d / limit_file)
            if not limit or limit == "max" or int(limit) >= NO_LIMIT:
                continue
            used = int(_read(d / usage_file) or 0) - _stat(d / "memory.stat").get(inactive, 0)
            free = max(0, int(limit) - max(0, used))
            if tightest is None or free < tightest[1]:
                tightest = (int(limit), free)
    return tightest


@dataclass(frozen=True)
class Seat:
    """What this process may use: CPUs (affinity, capped by a quota) and memory (the host's, capped by a limit)."""

    cpus: int  # CPUs in the affinity mask
    cpu_quota: float | None  # cores the tightest cgroup quota allows; None: no quota
    memory_limit: int | None  # bytes of the tightest cgroup memory limit; None: none
    memory_available: int  # bytes this process could still take: the host's available, or less under a limit
    threads_chosen_by: str  # "the lab" or the variable a learner set (OMP_NUM_THREADS...)

    @property
    def cores(self) -> int:
        """Whole cores to run on: the affinity mask's CPUs, capped by the quota (at least 1)."""
        quota = self.cpus if self.cpu_quota is None else max(1, math.floor(self.cpu_quota + 1e-9))
        return max(1, min(self.cpus, quota))

    def describe(self) -> dict[str, str]:
        """The seat's rows of the setup table."""
        quota = "none" if self.cpu_quota is None else f"{self.cpu_quota:g} cores"
        limit = "none" if self.memory_limit is None else f"{self.memory_limit / 2**30:.1f} GiB"
        return {"CPUs allowed (affinity / cgroup quota)": f"{self.cpus} / {quota} -> {self.cores}",
                "memory limit (cgroup) / available": f"{limit} / {self.memory_available / 2**30:.1f} GiB",
                "torch threads chosen by": self.threads_chosen_by}


def find_seat(proc_cgroup: Path = Path("/proc/self/cgroup"), mountinfo: Path = Path("/proc/self/mountinfo"),
              root: Path = Path("/")) -> Seat:
    """This process's seat: affinity, the tightest CPU quota and memory limit of its cgroup and their parents."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cpus = os.cpu_count() or 1
    quota = cpu_quota(cgroup_dirs("cpu", proc_cgroup, mountinfo, root))
    headroom = memory_headroom(cgroup_dirs("memory", proc_cgroup, mountinfo, root))
    available = psutil.virtual_memory().available
    if headroom is not None:
        available = min(available, headroom[1])
    chosen = next((name for name in THREADS_ENV if os.environ.get(name)), "the lab")
    return Seat(cpus, quota, headroom[0] if headroom else None, available, chosen)


def usable_cores() -> int:
    """CPU cores this process may run on: its affinity mask, capped by the tightest cgroup CPU quota."""
    return find_seat().cores


def use_seat_threads(seat: Seat | None = None) -> int:
    """Run torch on as many threads as the seat has cores, unless the learner chose them ($OMP_NUM_THREADS...).

    torch starts a thread per core of the host: a 2-core seat on a 64-core node would run 64 threads under a
    2-core quota and be throttled every period. Children the lab starts (the server, torchrun's ranks) get the
    same count through `seat_env`. Returns torch's thread count."""
    seat = seat or find_seat()
    if seat.threads_chosen_by == "the lab" and torch.get_num_threads() != seat.cores:
        torch.set_num_threads(seat.cores)
    return torch.get_num_threads()


def seat_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (else os.environ) with the seat's thread count for a child process, unless the learner set one."""
    env = dict(os.environ if env is None else env)
    if not any(env.get(name) for name in THREADS_ENV):
        env["OMP_NUM_THREADS"] = str(torch.get_num_threads())
    return env


def gpu_seat(device: torch.device) -> dict[str, str]:
    """A GPU's share here: memory free on this device (other processes and MIG slices included) and the other
    compute processes nvidia-smi lists on it (their ids may be hidden inside a container)."""
    free, total = torch.cuda.mem_get_info(device)
    rows = {"GPU memory free / total": f"{free / 2**30:.1f} / {total / 2**30:.1f} GiB"}
    others = gpu_processes(device)
    rows["other processes on the GPU"] = "unknown (no nvidia-smi)" if others is None else str(len(others))
    return rows


def gpu_processes(device: torch.device) -> list[int] | None:
    """Process ids of the compute processes on `device` other than this one; None where nvidia-smi is missing."""
    if shutil.which("nvidia-smi") is None:
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", ""))  # "" (every GPU) on an old torch
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    pids = []
    for line in out.splitlines():
        gpu, _, pid = line.partition(",")
        if pid.strip().isdigit() and uuid in gpu and int(pid) != os.getpid():
            pids.append(int(pid))
    return pids


CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")  # where a cgroup v1 machine mounts the cpu controller
CGROUP_V2 = Path("/sys/fs/cgroup")


@contextmanager
def cpu_quota_seat(cores: float, pid: int | None = None) -> Iterator[Path]:
    """Put process `pid` (default: this one; its children inherit it) into a new cgroup with a CPU quota of
    `cores`, as a JupyterHub seat is; on the way out move it back and remove the cgroup. Needs root and a
    writable cgroup file system (v1's cpu controller, or v2 with cpu enabled); PermissionError/OSError if not."""
    if not 0 < cores <= (os.cpu_count() or 1):
        raise ValueError(f"cores must be in (0, {os.cpu_count()}], got {cores}")
    pid = pid or os.getpid()
    period = 100_000
    name = f"lab-seat-{os.getpid()}-{int(time.time() * 1000) % 10**6}"
    if (CGROUP_V1_CPU / "cpu.cfs_quota_us").exists():
        group, parent = CGROUP_V1_CPU / name, CGROUP_V1_CPU
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(period))
        (group / "cpu.cfs_quota_us").write_text(str(int(cores * period)))
    else:
        own = cgroup_dirs("cpu")
        parent = own[0] if own else CGROUP_V2
        group = parent / name
        group.mkdir()
        (group / "cpu.max").write_text(f"{int(cores * period)} {period}")
    try:
        (group / "cgroup.procs").write_text(str(pid))
        yield group
    finally:
        with suppress(OSError):
            (parent / "cgroup.procs").write_text(str(pid))
        for _ in range(50):  # the cgroup can be removed once its last process has left
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
