"""Wall stands are counted on the claw's contact with a bin, the hand held still away from its target."""
import json

import pytest

from research.interventions.stands import episodes, longest_stand, start_object


def line(step, z, target_z=0.07, contacts=("rightclaw_it|binA",), seed=23):
    return {"seed": seed, "episode_step": step, "hand": [0.0, 0.73, z], "target": [0.0, 0.73, target_z],
            "contacts": list(contacts)}


@pytest.mark.parametrize("name, steps, want", [
    ("held on the wall 11 steps", [line(i, 0.2 - 0.01 * i) for i in range(10)] + [line(10 + i, 0.105) for i in range(11)], 11 - 5 + 1),
    ("standing at its target (a grasp)", [line(i, 0.07, target_z=0.07) for i in range(20)], 0),
    ("held, but touching only the object", [line(i, 0.105, contacts=("objA|binA",)) for i in range(20)], 0),
    ("on the wall, moving", [line(i, 0.2 - 0.01 * i) for i in range(12)], 0),
])
def test_longest_stand(name, steps, want):
    assert longest_stand(steps) == want, name


def test_episodes_split_on_seed_and_restart(tmp_path):
    rows = [line(0, 0.2, seed=1), line(1, 0.2, seed=1), line(0, 0.2, seed=2), line(0, 0.2, seed=2)]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [len(v) for v in episodes(p).values()] == [2, 1, 1]


def test_start_object_reads_the_first_line_that_has_it():
    steps = [line(0, 0.2), dict(line(1, 0.2), object=[-0.046, 0.718, 0.03]), dict(line(2, 0.2), object=[0.0, 0.0, 0.0])]
    assert start_object(steps) == (-0.046, 0.718)
    assert start_object([line(0, 0.2)]) is None
