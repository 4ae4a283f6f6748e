"""The H200 folder's report.json / report.txt (the latest, which the dashboard reads) from runs 8
and 9: run 8's full report (tree b7642ad, one op at a time) with KL's summed rows replaced by run
9's (tree 869d888, the 2^22 KL rows). The two trees differ in the reduce walk alone (reduce_lanes'
two constants: at most 8 lanes of 8 terms -> 4 of 16), which only the summed rows launch: every
other kernel compiles to the same TTIR in both (`losstune restamp`, 47 of the table's entries
same). Usage: python merge_run8_9.py (repo root)."""

from __future__ import annotations

import json
from pathlib import Path

from tuner.bench import BenchRow, format_report
from tuner.freeze import write_atomic

HERE = Path(__file__).resolve().parent.parent
OPS = ("mse", "l1", "kl_div", "kl_div-log")


def key(row: dict[str, object]) -> tuple[object, ...]:
    return row["op"], row["dtype"], row["reduction"], row["numel"], row["case"]


def main() -> None:
    parts = [json.loads((HERE / "run8" / f"report-{op}.json").read_text()) for op in OPS]
    summed = {key(r): r for r in json.loads((HERE / "run9" / "report-kl-2p22.json").read_text())["rows"]}
    rows = []
    for part in parts:
        for row in part["rows"]:
            rows.append(summed[key(row)] if row["case"] == "summed" else row)
    assert sum(r["case"] == "summed" for r in rows) == len([k for k in summed if k[-1] == "summed"]) == 12
    header = (
        "losstune bench --report on x86_64-avx512-16t-emeraldrapids-nvidia-h200 (Intel(R) Xeon(R) Processor),"
        " backend cuda, 2026-11-27: run 8 (tree b7642ad; mse 57 s, l1 61 s, kl_div 61 s, kl_div-log 68 s,"
        " as each report timed itself)"
        " with KL's 12 summed rows from run 9 (tree 869d888)\n" + parts[0]["header"].split("\n", 1)[1]
    )
    table = format_report([BenchRow(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items()}) for r in rows])
    payload = {"header": header, "host": parts[0]["host"], "commit": "869d888", "rows": rows}
    write_atomic(HERE / "report.json", payload)
    write_atomic(HERE / "report.txt", header + "\n" + table + "\n")


if __name__ == "__main__":
    main()
