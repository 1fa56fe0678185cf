"""Does the shipped stop trip on the policy's own level-0 rollouts, and does it still catch a push?

Issue 48 asked for the state term to be retrained on the policy's own
successful rollouts. This reads, per task, the shipped bundle's
``state_energy.onnx`` (the state score exactly as the runtime computes it)
over recorded rollouts (``scripts/rollouts.sh``: sim eval --observe-only
--record at 10 Hz, plans held 0–3 control periods, the runtime's late-plan
bridge as recorded) and over recorded push episodes (sim eval --fault push
--observe-only --record), and applies the gate's rule (2 of the last 5
scores over the threshold):

* rollouts: how many successful episodes would have tripped, per delay;
* pushes: how many episodes trip within 10 ticks (1 s at 10 Hz) of the
  push's first visible tick.

With ``--retrain DEMOS.hdf5`` it also trains the state term on the
demonstrations plus the rollouts (``energyflow.state_term.fit_state_term``
with ``rollouts``, as ``energyflow state-term --rollouts`` does) and reads
the same episodes at that term's held-out q99.9, to compare.

    PYTHONPATH=training .venv/bin/python -m research.stop_rollouts.stop_on_rollouts \\
        --task button-press --rollouts research/stop_rollouts/data/button-press \\
        --push research/stop_rollouts/data/push-button-press [--retrain build/demos/button-press.hdf5]
"""
from __future__ import annotations

import argparse
import glob
import json
import tarfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from energyflow import state_term as st
from energyflow.bundle import read_manifest
from energyflow.data import Demo, load_hdf5, load_rollouts

N, M = 2, 5  # the gate's window for state_energy

#: the tracked recordings: data/<task>/d<D>/summary.json beside data/recordings.tar.gz, which
#: holds every episode's HDF5 (0.8 MB packed against 3.4 MB as files: a light checkout)
DATA = Path(__file__).resolve().parent / "data"


def unpack_recordings(data: Path = DATA) -> int:
    """Extract data/recordings.tar.gz next to the summaries (once; the files are git-ignored).
    Returns how many files were written."""
    n = 0
    with tarfile.open(data / "recordings.tar.gz") as tar:
        for m in tar.getmembers():
            if m.isfile() and not (data / m.name).exists():
                tar.extract(m, data, filter="data")
                n += 1
    return n


def trips(scores: np.ndarray, thr: float, n: int = N, m: int = M) -> np.ndarray:
    """Per tick: n of the last m scores (this one included) over thr."""
    over = (scores > thr).astype(int)
    return np.convolve(over, np.ones(m, int), "full")[: len(over)] >= n


def shipped_scores(bundle: Path, man: Dict, demos: Sequence[Demo]) -> List[np.ndarray]:
    """The shipped state_energy.onnx over every step of each episode (history padded as the runtime's)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(bundle / st.GRAPH_FILE), providers=["CPUExecutionProvider"])
    out = []
    for d in demos:
        cond, _ = st.step_conds([d], man)
        (y,) = sess.run(None, {st.INPUT: cond})
        out.append(y.astype(np.float64))
    return out


def retrained_scores(man: Dict, demos_file: Path, rollouts: Sequence[Demo],
                     episodes: Sequence[Sequence[Demo]]) -> Tuple[float, float, List[List[np.ndarray]]]:
    """Train the state term on the demonstrations + rollouts; its held-out q99.9 (demonstrations and
    rollouts held out), the q99.9 over its held-out demonstration steps alone, and its scores."""
    import torch

    from energyflow.data import split_demos

    torch.set_num_threads(1)
    demos, _ = load_hdf5(demos_file, [o["name"] for o in man["obs"]])
    reading, _, cal, _ = st.fit_state_term(man, demos, st.StateTermConfig(seed=0), 0.1, 0, 0, rollouts)
    _, held = split_demos(demos, 0.1, 0)
    q_demos = float(np.quantile(st.read(reading, st.step_conds(held, man)[0]), 0.999))
    return cal["quantiles"]["99.9"], q_demos, [[st.read(reading, st.step_conds([d], man)[0]) for d in eps]
                                               for eps in episodes]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", required=True)
    p.add_argument("--bundle", help="default bundles/metaworld-TASK")
    p.add_argument("--rollouts", required=True, help="a scripts/rollouts.sh folder (d0 … d3)")
    p.add_argument("--push", help="a sim eval --fault push --observe-only --record folder with summary.json")
    p.add_argument("--fault-step", type=int, default=30)
    p.add_argument("--within", type=int, default=10, help="ticks after the push (10: 1 s at 10 Hz)")
    p.add_argument("--max-success-step", type=int, required=True,
                   help="leave out rollouts that succeeded later (state-term --rollouts uses 2 × the longest demo)")
    p.add_argument("--retrain", help="the demonstrations (HDF5): also read a term trained on them + the rollouts")
    p.add_argument("--json", help="write the table as JSON here")
    a = p.parse_args(argv)
    unpack_recordings()
    bundle = Path(a.bundle or f"bundles/metaworld-{a.task}")
    man = read_manifest(bundle)
    keys = [o["name"] for o in man["obs"]]
    thr = float(man["state_energy"]["calibration"]["quantiles"]["99.9"])
    cl = [c for c in [man["calibration"].get("closed_loop")] + (man["calibration"].get("closed_loop_others") or [])
          if c and c.get("score") == "state_energy" and c.get("rate_hz") == 10]
    if cl:
        thr = float(cl[0]["bands"][0]["threshold"])
    delays = sorted(Path(x) for x in glob.glob(f"{a.rollouts}/d*"))
    by_delay: Dict[str, List[Demo]] = {}
    counts: Dict[str, Dict] = {}
    for d in delays:
        demos, c = load_rollouts([d], keys, max_success_step=a.max_success_step)
        by_delay[d.name], counts[d.name] = demos, c
    push: List[Demo] = []
    if a.push:
        for f in sorted(glob.glob(f"{a.push}/*/*.hdf5")):
            push += load_hdf5(f, keys)[0]
    rows = []

    def table(name: str, threshold: float, ro_scores: Dict[str, List[np.ndarray]], push_scores: List[np.ndarray]):
        r = {"term": name, "threshold": threshold, "rollouts": {}, "push": None}
        for k, ss in ro_scores.items():
            r["rollouts"][k] = {"episodes": len(ss), "tripped": int(sum(trips(s, threshold).any() for s in ss)),
                                "left_out_late": counts[k]["late_successes"],
                                "failed": counts[k]["episodes"] - counts[k]["successes"]}
        if push_scores:
            base = 4  # ticks from the episode's step 0 to the first running tick (auto-start), measured ~3–5
            caught = [bool(trips(s, threshold)[max(0, a.fault_step - base - 2): a.fault_step - base + a.within].any())
                      for s in push_scores]
            r["push"] = {"episodes": len(caught), "caught_within": a.within, "caught": int(sum(caught))}
        rows.append(r)
        ro = ", ".join(f"{k} {v['tripped']}/{v['episodes']}" for k, v in r["rollouts"].items())
        pu = f"; push caught {r['push']['caught']}/{r['push']['episodes']} within {a.within} ticks" if r["push"] else ""
        print(f"{a.task}, {name} (threshold {threshold:.2f}): rollouts tripping 2-of-5: {ro}{pu}")

    table("shipped", thr, {k: shipped_scores(bundle, man, v) for k, v in by_delay.items()},
          shipped_scores(bundle, man, push) if push else [])
    if a.retrain:
        allro = [x for v in by_delay.values() for x in v]
        q, q_demos, scored = retrained_scores(man, Path(a.retrain), allro, [allro] + ([push] if push else []))
        for name, thr_ in (("retrained on demos + these rollouts", q),
                           ("retrained, threshold from its held-out demonstrations alone", q_demos)):
            it = iter(scored[0])
            table(name, thr_, {k: [next(it) for _ in v] for k, v in by_delay.items()}, scored[1] if push else [])
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
