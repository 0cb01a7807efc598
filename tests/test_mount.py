"""`concerto mount`: the cluster as a FUSE mount, exercised by unmodified
programs (fio with verification, a plain Python open/write), stopped by
SIGTERM, and its bad input. Needs /dev/fuse and root, as CI has."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from concerto import cluster as local
from concerto import fs
from conftest import mounted_at


def _mounted(path: Path) -> bool:
    with open("/proc/self/mounts") as f:
        return any(line.split(" ")[1] == str(path) for line in f)


@pytest.fixture()
def mounted(tmp_path):
    cluster = local.up(tmp_path / "cluster", local.ClusterSpec(servers=4, policy="sfq-d-plus", stripe_unit=65536))
    try:
        mnt = tmp_path / "mnt"
        with mounted_at(cluster, mnt) as proc:
            yield cluster, mnt, proc
    finally:
        local.down(tmp_path / "cluster")


def test_fio_verifies_sequential_and_direct_io_through_write_behind_and_read_ahead(mounted, tmp_path):
    _, mnt, proc = mounted
    # Sequential 1 MiB writes (written behind) read back sequentially (read
    # ahead), then 4 KiB writes with O_DIRECT (written through) mixed with
    # reads, every block checked.
    for args in (["--rw=write", "--bs=1m", "--size=32m"],
                 ["--rw=randrw", "--bs=4k", "--size=2m", "--direct=1"]):
        run = subprocess.run(
            ["fio", "--name=seq", f"--directory={mnt}", *args, "--ioengine=psync", "--verify=crc32c",
             "--do_verify=1", "--verify_fatal=1", "--end_fsync=1", "--output-format=json"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        job = json.loads(run.stdout[run.stdout.index("{"):])["jobs"][0]
        assert job["error"] == 0 and job["read"]["io_bytes"] > 0, args
    assert proc.poll() is None


def _strided_rank(path: str, rank: int, ranks: int, segments: int, block: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    for s in range(segments):
        os.pwrite(fd, bytes([rank + 1]) * block, (s * ranks + rank) * block)
    os.close(fd)


def test_processes_writing_one_file_strided_through_the_mount_give_every_block(mounted):
    # IOR's -t 64k -b 64k -s 64 with four ranks: each write extends the file
    # (the kernel holds the file's lock across such writes), written behind.
    _, mnt, _ = mounted
    import multiprocessing as mp
    path, ranks, segments, block = str(mnt / "ior"), 4, 64, 65536
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_strided_rank, args=(path, r, ranks, segments, block)) for r in range(ranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    data = (mnt / "ior").read_bytes()
    assert len(data) == ranks * segments * block
    for i in range(ranks * segments):
        assert data[i * block:(i + 1) * block] == bytes([i % ranks + 1]) * block, f"block {i}"


def test_fio_verifies_every_block_written_through_the_mount(mounted, tmp_path):
    cluster, mnt, proc = mounted
    # Two jobs (two processes) write their own files in random 64 KiB blocks
    # with a checksum in each, then read every block back and check it.
    run = subprocess.run(
        ["fio", "--name=verify", f"--directory={mnt}", "--rw=randwrite", "--bs=64k", "--size=4m",
         "--numjobs=2", "--ioengine=psync", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
         "--end_fsync=1", "--output-format=json"],
        # fio writes its verify state files into its working directory.
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "CONCERTO_APP_ID": "41"})
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout[run.stdout.index("{"):])
    jobs = report["jobs"]
    assert len(jobs) == 2 and all(j["error"] == 0 for j in jobs)
    assert all(j["write"]["io_bytes"] == 4 << 20 and j["read"]["io_bytes"] == 4 << 20 for j in jobs)
    # The files are ordinary striped Concerto files, tagged with fio's application id.
    client = fs.connect(cluster, app=1)
    names = sorted(e.name for e in client.listdir("/"))
    assert names == ["verify.0.0", "verify.1.0"]
    st = client.stat("/verify.0.0")
    assert st.size == 4 << 20 and len([n for n in client.open("/verify.0.0").object_sizes() if n]) == 4
    written = sum(a["write_bytes"] for s in client.server_stats() for a in s["apps"] if a["app"] == 41)
    assert written >= 2 * (4 << 20)
    assert proc.poll() is None


def test_a_plain_program_writes_and_sigterm_unmounts_with_files_open(mounted, tmp_path):
    cluster, mnt, proc = mounted
    script = f"open({str(mnt / 'plain')!r}, 'wb').write(bytes(range(256)) * 1000)"
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert fs.connect(cluster).open("/plain").read(0, 1 << 20) == bytes(range(256)) * 1000
    assert (mnt / "plain").stat().st_size == 256_000
    held = open(mnt / "plain", "rb")  # still open when the mount is told to stop
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not _mounted(mnt.resolve())
    finally:
        try:
            held.close()
        except OSError:
            pass  # the mount it belonged to is gone


def test_a_killed_mount_leaves_nothing_a_new_mount_cannot_clear(mounted, tmp_path):
    cluster, mnt, proc = mounted
    (mnt / "kept").write_bytes(b"still here")
    # SIGKILL: the process cannot unmount; the kernel keeps a dead mount.
    proc.kill()
    proc.wait(30)
    with pytest.raises(OSError) as stale:
        os.stat(mnt)
    assert stale.value.errno == 107  # ENOTCONN: the stale mount
    ready = tmp_path / "again.json"
    again = subprocess.Popen([sys.executable, "-m", "concerto", "mount", "--cluster", str(cluster), str(mnt),
                              "--ready-file", str(ready)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert again.poll() is None, f"the second mount exited: {again.stderr.read()}"
            assert time.monotonic() < deadline, "the second mount did not come up"
            time.sleep(0.05)
        assert (mnt / "kept").read_bytes() == b"still here"
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(30) == 0
    assert "cleared the stale mount" in again.stderr.read()
    assert not _mounted(mnt.resolve())


def test_a_mount_unmounted_by_someone_else_says_so_and_stops(mounted):
    _, mnt, proc = mounted
    subprocess.run(["umount", str(mnt)], check=True, timeout=30)
    assert proc.wait(30) == 0
    assert "was unmounted by someone else; stopping" in proc.stderr.read()
    assert not _mounted(mnt.resolve())


def test_mount_bad_input_is_named(tmp_path):
    def mount(*args):
        return subprocess.run([sys.executable, "-m", "concerto", "mount", *args],
                              capture_output=True, text=True, timeout=60)

    (tmp_path / "mnt").mkdir()
    r = mount("--cluster", str(tmp_path / "nope.toml"), str(tmp_path / "mnt"))
    assert r.returncode != 0 and "no cluster file" in r.stderr
    r = mount("--cluster", str(tmp_path / "nope.toml"), str(tmp_path / "missing"))
    assert r.returncode != 0 and "missing" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("servers = 3\n")
    r = mount("--cluster", str(bad), str(tmp_path / "mnt"))
    assert r.returncode != 0 and f"{bad}: line 1, column 11: servers: invalid type" in r.stderr, r.stderr
    r = mount("--cluster", str(bad), str(tmp_path / "mnt"), "--attr-ttl", "-1")
    assert r.returncode != 0 and "attr-ttl" in r.stderr
    r = mount("--cluster", str(bad), str(tmp_path / "mnt"), "--write-behind", "lots")
    assert r.returncode != 0 and "--write-behind" in r.stderr and "lots" in r.stderr, r.stderr
    r = mount("--cluster", str(bad), str(tmp_path / "mnt"), "--transfers", "hash-ios,block=0")
    assert r.returncode != 0 and "--transfers" in r.stderr and "block=0" in r.stderr, r.stderr


def _apps_writing(cluster: Path) -> dict[int, int]:
    """Bytes written per application, summed over the servers."""
    written: dict[int, int] = {}
    for s in fs.connect(cluster, app=1).server_stats():
        for a in s["apps"]:
            written[a["app"]] = written.get(a["app"], 0) + a["write_bytes"]
    return written


# (launcher, how it runs N ranks as root on a 2-core machine)
LAUNCHERS = {
    "openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n"],
    "mpich": ["mpiexec.mpich", "-n"],
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_ranks_of_one_mpirun_job_are_one_application(mounted, tmp_path, launcher):
    # A plain mpirun (no batch system): four ranks write through the mount
    # (dd, an unmodified program) and through the client library; the
    # servers see one new application for each job, holding all four
    # ranks' bytes, not one per rank.
    cluster, mnt, _ = mounted
    env = {k: v for k, v in os.environ.items() if k not in ("CONCERTO_APP_ID", "SLURM_JOB_ID")}
    block = 256 << 10
    rank = "${OMPI_COMM_WORLD_RANK:-$PMI_RANK}"
    jobs = {
        "mount": f"dd if=/dev/zero of={mnt}/{launcher}-$R bs={block} count=1 conv=fsync status=none",
        "library": f"{sys.executable} -c \"from concerto import fs; "
                   f"f = fs.connect('{cluster}').create('/lib-{launcher}-$R'); "
                   f"f.write(0, bytes({block})); f.fsync()\"",
    }
    for how, command in jobs.items():
        before = _apps_writing(cluster)
        run = subprocess.run([*LAUNCHERS[launcher], "4", "sh", "-c", f"R={rank}; {command}"],
                             capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert run.returncode == 0, f"{how}: {run.stderr}"
        after = _apps_writing(cluster)
        grew = {app: n - before.get(app, 0) for app, n in after.items() if n > before.get(app, 0)}
        assert len(grew) == 1, f"{how}: applications that wrote: {grew}"
        assert list(grew.values()) == [4 * block], f"{how}: {grew}"
