"""The inference latency the tracked level-0 runs recorded (docs/evaluation.md, "Latency, as the tracked runs recorded it")."""
import glob
import json


def main() -> None:
    print("| run (tracked summary) | task | K | episodes | inference p50 / p90 | p90 in control periods |")
    print("|---|---|---|---|---|---|")
    for f in sorted(glob.glob("research/stop_rollouts/data/*/d0/summary.json")) + sorted(glob.glob("research/faults/results/*-level0.json")):
        s = json.load(open(f))
        print(f"| `{f}` | {s['task']} | {s['steps_k']} | {s['episodes']} | {s['inference_p50_ms']:.0f} / {s['inference_p90_ms']:.0f} ms "
              f"| {s['inference_p90_ms'] * s['rate_hz'] / 1000:.2f} at {s['rate_hz']} Hz |")


if __name__ == "__main__":
    main()
