"""``concerto profile``: profile storage for SFQ(D)+'s parameters.

The sweep and the recommendation are concerto-core's (``profile::run``);
the probe is the simulator's (a modelled device), or real storage: a local
directory, or a running data server through its own request path
(concerto-client's ``probe``). The result is shown as a table, a plot and
``profile.json``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import tomli_w
from rich.table import Table

from concerto import _native, tomlvalue
from concerto.report import fmt_bw, fmt_time, pyplot, save, write_json
from concerto.terminal import exact_size



def device_toml(spec: str) -> str:
    """The device description as TOML keys of a ``[cluster.device]`` table.

    ``spec`` is a TOML file (a scenario, whose ``[cluster.device]`` is used,
    a file with a ``[device]`` table, or the device keys themselves), or
    ``key=value`` pairs separated by commas: ``kind=ssd,latency=2ms``.
    """
    path = Path(spec)
    if path.suffix == ".toml" or path.is_file():
        try:
            doc = tomllib.loads(path.read_text())
        except OSError as e:
            raise _native.ConfigError(f"--device: {path}: cannot read ({e.strerror})") from e
        except tomllib.TOMLDecodeError as e:
            raise _native.ConfigError(f"--device: {path}: invalid TOML: {e}") from e
        for table in (doc.get("scenario", {}).get("cluster", {}).get("device"), doc.get("cluster", {}).get("device"),
                      doc.get("device"), doc):
            if isinstance(table, dict) and "kind" in table:
                return _dump(table)
        raise _native.ConfigError(f"--device: {path}: no device table (with a kind) found")
    pairs = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise _native.ConfigError(f"--device: {item!r} is not key=value")
        pairs[key.strip()] = value.strip()
    if "kind" not in pairs:
        raise _native.ConfigError("--device: say which kind of device (kind=ssd, kind=hdd or kind=fixed)")
    # Each value as `--set` reads it: `channels=4` a number, `latency=2ms` a string.
    return _dump({k: tomlvalue.read(v) for k, v in pairs.items()})


def _dump(table: dict) -> str:
    return tomli_w.dumps(table)


#: The sweep on real storage unless told otherwise: fewer points than the
#: simulated default, since each one takes real time.
REAL_STORAGE_SPEC = {
    "sizes": ["4KiB", "16KiB", "64KiB", "256KiB", "1MiB", "4MiB"],
    "depths": [1, 2, 4, 8, 16, 32],
    "count": 500,
}


def profile(device: str, spec: dict | None = None, seed: int = 1) -> dict:
    return _native.profile_device(device_toml(device), spec, seed)


def profile_directory(directory: Path, working_set: int | None, spec: dict, seed: int = 1) -> dict:
    """Profiles the storage under ``directory`` (default working set 1 GiB)."""
    return _native.profile_directory(Path(directory), working_set or (1 << 30), spec, seed)


def profile_server(cluster: Path | None, server: str, working_set: int | None, spec: dict, seed: int = 1) -> dict:
    """Profiles data server ``server`` (id or address) of the cluster (default working set 64 MiB)."""
    from concerto.fs import cluster_path

    path = cluster_path(cluster)
    try:
        text = path.read_text()
    except OSError as e:
        raise OSError(e.errno, f"cluster file: {e.strerror}", str(path)) from e
    return _native.profile_server(text, path, server, working_set or (64 << 20), spec, seed)


def table(p: dict) -> Table:
    t = Table(title=f"{_what(p)}: throughput against outstanding I/Os, latency by size", title_justify="left")
    for col in ["size", "saturates at depth", "peak throughput", "latency at depth 1", "latency at saturation",
                "device time", "parallelism"]:
        t.add_column(col, justify="right")
    for s in p["sizes"]:
        sat = next(x for x in s["samples"] if x["depth"] == s["saturation_depth"])
        t.add_row(exact_size(s["size"]), str(s["saturation_depth"]), fmt_bw(s["peak_throughput_Bps"]),
                  fmt_time(s["latency_s"]), fmt_time(sat["mean_latency_s"]), fmt_time(s["device_latency_s"]),
                  f"{s['parallelism']:.1f}")
    r = p["recommendation"]
    t.caption = (f"recommended: depth (D) = {r['depth']}, small_threshold = {exact_size(r['small_threshold'])}, "
                 f"large_slots (L) = {r['large_slots']} for {exact_size(r['large_size'])} I/Os; latency slope "
                 f"{r['latency_slope_s_per_byte'] * 1e6 * 1024:.2f} us per KiB. Device time: latency at depth 1 less "
                 f"the probe's overhead ({fmt_time(p['overhead_s'])}); parallelism: peak I/O rate times device time")
    probe = p.get("probe", {})
    if probe.get("kind") == "directory" and not probe.get("direct"):
        t.caption += (". O_DIRECT is not supported there: reads went through the page cache (its pages were "
                      "dropped before each point)")
    return t


def _what(p: dict) -> str:
    probe = p.get("probe", {})
    if probe.get("kind") == "directory":
        return f"{probe['path']} ({'O_DIRECT' if probe.get('direct') else 'page cache'})"
    if probe.get("kind") == "server":
        return f"data server {probe['id']} at {probe['address']}"
    return "simulated device"


def plot(p: dict, base: Path) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for s in p["sizes"]:
        left.plot([x["depth"] for x in s["samples"]], [x["throughput_Bps"] / 1e6 for x in s["samples"]],
                  marker=".", label=exact_size(s["size"]))
    r = p["recommendation"]
    left.axvline(r["depth"], color="#888", linestyle="--", linewidth=0.8)
    left.set_xlabel("outstanding I/Os")
    left.set_ylabel("throughput (MB/s)")
    left.set_title(f"throughput (D = {r['depth']})")
    left.legend(fontsize=7)
    sizes = [s["size"] for s in p["sizes"]]
    right.plot([x / 1024 for x in sizes], [s["latency_s"] * 1e3 for s in p["sizes"]], marker="o", label="measured")
    fit = [(r["latency_intercept_s"] + r["latency_slope_s_per_byte"] * x) * 1e3 for x in sizes]
    right.plot([x / 1024 for x in sizes], fit, linestyle=":", label="least squares")
    right.axvline(r["small_threshold"] / 1024, color="#888", linestyle="--", linewidth=0.8)
    right.set_xscale("log", base=2)
    right.set_xlabel("I/O size (KiB)")
    right.set_ylabel("latency at depth 1 (ms)")
    right.set_title(f"latency (small below {exact_size(r['small_threshold'])})")
    right.legend(fontsize=7)
    save(fig, base)
    plt.close(fig)


def write(p: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "profile.json", p)
    plot(p, out / "profile")
