"""Soak test of lesson 08: every distributed cell, many times in a row, in one kernel.

Round 1 runs the whole lesson (its source, solutions/08_distributed/08_distributed.pct.py) top to bottom. Every further round runs
again each cell that starts processes: the lesson's fork launcher
(``run_on_ranks``), ``mp.spawn``, ``torchrun`` on one "machine" and on two, the
port clash, Lightning's ``Trainer.fit``, and every check (each starts a real
process group with ``helpers.checks.distributed.run_group``). A failure is a
cell that raised; a hang is a cell still running after ``--cell-timeout``
seconds (the kernel is interrupted and the soak goes on). It prints, for every
such cell, runs, failures, hangs and seconds per launch, and the peak memory of
the kernel and every process it started together (proportional set size, so
pages that forked processes share are counted once). Exit status 1 on any
failure or hang.

    python -m tests.soak_distributed --runs 20     (or: make soak)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

from coursetools.authoring import source_to_notebook
from coursetools.bench import MemoryWatch
from helpers.data import REPO_ROOT

SOURCE = REPO_ROOT / "solutions" / "08_distributed" / "08_distributed.pct.py"
LAUNCHES = re.compile(r"run_on_ranks\(|run_command\(|spawned_stderr\(|trainer\.fit\(|check\.check_")


@dataclass
class CellRecord:
    label: str
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    hangs: int = 0
    peak_bytes: int = 0


def _label(cell: nbformat.NotebookNode, index: int) -> str:
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    if grade_id:
        return grade_id
    line = next((s for s in cell.source.splitlines() if LAUNCHES.search(s)), cell.source.splitlines()[0])
    return f"cell {index}: {line.strip()[:48]}"


def _printed_error(cell: nbformat.NotebookNode) -> str:
    """What a failed launcher printed about why (``cell``'s stream output), else "".

    torchrun's summary names the root cause after ``Root Cause``: the rank, its exit code or signal. A worker's
    own last words (an exception, or a C++ ``terminate called ...``) come before it; both are kept.
    """
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    said = [line.strip() for line in text.split("Root Cause")[0].splitlines()
            if re.search(r"Error|error:|EADDRINUSE|Timed out|terminate called", line)]
    cause = re.search(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*([^\n]+)", text, re.S)
    found = [f"rank {cause[1]} exit code {cause[2].strip()}"] if cause else []
    found += [line for line in said if "ChildFailedError" not in line][-1:] or ([] if cause else said[-1:])
    return " | ".join(found)[:300]


def soak(runs: int, source: Path = SOURCE, cell_timeout: float = 330.0, verbose: bool = True) -> dict:
    """Run the lesson once, then its launching cells ``runs - 1`` more times; return the records."""
    nb = source_to_notebook(source)
    launching = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and LAUNCHES.search(c.source)]
    records = {i: CellRecord(_label(nb.cells[i], i)) for i in launching}
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", interrupt_on_timeout=True,
                            resources={"metadata": {"path": str(source.parent)}})
    started = time.perf_counter()
    with client.setup_kernel():
        with MemoryWatch(client.km.provisioner.process.pid) as memory:
            for round_number in range(1, runs + 1):
                cells = range(len(nb.cells)) if round_number == 1 else launching
                for index in cells:
                    cell = nb.cells[index]
                    if cell.cell_type != "code":
                        continue
                    begun, memory.recent_peak = time.perf_counter(), 0
                    try:
                        client.execute_cell(cell, index)
                        failure = None
                    except CellTimeoutError:
                        failure = "hang"
                    except CellExecutionError as error:
                        failure = str(error).strip().splitlines()[-1][:200]
                        printed = _printed_error(cell)
                        if printed:  # a launcher's own error, printed by the cell before it raised
                            failure = f"{failure} | printed: {printed}"
                    if index in records:
                        record = records[index]
                        record.seconds.append(time.perf_counter() - begun)
                        record.peak_bytes = max(record.peak_bytes, memory.recent_peak)
                        if failure == "hang":
                            record.hangs += 1
                        elif failure:
                            record.failures.append(failure)
                    elif failure:
                        raise RuntimeError(f"cell {index} (no launch) failed in round {round_number}: {failure}")
                if verbose:
                    bad = sum(len(r.failures) + r.hangs for r in records.values())
                    print(f"round {round_number}/{runs}: {time.perf_counter() - started:.0f} s so far, "
                          f"{bad} failures or hangs, peak memory {memory.peak / 2**20:.0f} MB", flush=True)
    return {"records": list(records.values()), "peak_bytes": memory.peak, "seconds": time.perf_counter() - started}


def format_table(result: dict) -> str:
    records = result["records"]
    lines = [f"{'cell that launches processes':<56} "
             f"{'runs':>4} {'failed':>6} {'hung':>4} {'mean s':>7} {'max s':>6} {'peak MB':>7}"]
    for r in records:
        mean = statistics.mean(r.seconds) if r.seconds else float("nan")
        lines.append(f"{r.label:<56} {len(r.seconds):>4} {len(r.failures):>6} {r.hangs:>4} {mean:>7.2f} "
                     f"{max(r.seconds, default=float('nan')):>6.2f} {r.peak_bytes / 2**20:>7.0f}")
    failures = sum(len(r.failures) for r in records)
    hangs = sum(r.hangs for r in records)
    launches = sum(len(r.seconds) for r in records)
    lines.append(f"{launches} launches in {result['seconds']:.0f} s: {failures} failed, {hangs} hung; "
                 f"peak memory of the kernel and all its processes {result['peak_bytes'] / 2**20:.0f} MB (PSS)")
    for r in records:
        for message in sorted(set(r.failures)):
            lines.append(f"  {r.label}: {message}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak_distributed")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cell-timeout", type=float, default=330.0,
                        help="seconds before a cell counts as hung (beyond the lesson's own 300 s launch deadline)")
    parser.add_argument("--source", type=Path, default=SOURCE, help="the lesson source (.pct.py)")
    args = parser.parse_args(argv)
    if not os.environ.get("COURSE_DATA"):
        print("note: COURSE_DATA is not set; `make soak` points it at the offline fixture", file=sys.stderr)
    result = soak(args.runs, args.source, args.cell_timeout)
    print(format_table(result))
    return 1 if any(r.failures or r.hangs for r in result["records"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
