"""``research/ood/state_components.py``: the z row read out of an exported state_energy.onnx,
the 2-of-5 statistic and the threshold it is compared with."""
from pathlib import Path

import numpy as np
import pytest
import torch

from energyflow import state_term as st
from research.ood import state_components as sc

torch.set_num_threads(1)


def exported(tmp_path: Path, extras: bool):
    """A small reading (g over 8 σ, with transition and RND when ``extras``) exported as a bundle's graph,
    and the manifest block the script reads."""
    torch.manual_seed(1)
    net = st.StateEnergyNet(8, (16, 16))
    torch.nn.init.normal_(net.out.weight, std=0.5)
    held = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    comps = {}
    if extras:
        comps = {"transition": st.TransitionScore(*st.fit_transition(held, 2)), "rnd": st.train_rnd(held, steps=20)[0]}
    reading = st.fit_reading(net.eval(), st.sigma_grid(8), held, comps)
    st.export_state_energy(reading, tmp_path / st.GRAPH_FILE)
    blk = {"graph": st.GRAPH_FILE, "output": st.OUTPUT, "sigmas": st.sigma_grid(8).tolist(),
           "calibration": {"quantiles": {"99.9": 3.5}}}
    if extras:
        blk["components"] = reading.components
    return reading, {"state_energy": blk}


@pytest.mark.parametrize("extras", [False, True])
def test_z_row_is_the_graphs_own(tmp_path: Path, extras: bool) -> None:
    reading, man = exported(tmp_path, extras)
    sess, out_name, z_name, names = sc.components_session(tmp_path, man)
    assert names == ["g"] * 8 + (["transition", "rnd"] if extras else [])
    c = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32) * 3
    se, z = sess.run([out_name, z_name], {"cond": c})
    z = np.asarray(z).reshape(4, -1)
    with torch.no_grad():
        x = torch.from_numpy(c)
        want = torch.cat([reading.z(x), reading.extra_z(x)], dim=-1).numpy()
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(se, z.max(1), rtol=1e-6)
    comp = sc.per_component(z, names)
    assert list(comp) == list(dict.fromkeys(names))
    np.testing.assert_allclose(comp["g"], z[:, :8].max(1))
    if extras:
        np.testing.assert_allclose(comp["rnd"], z[:, 9])


def test_refuses_a_bundle_without_the_state_term(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no state term"):
        sc.components_session(tmp_path, {})


@pytest.mark.parametrize("x, want", [
    ([1, 9, 1, 1, 1, 1], [-np.inf, 1, 1, 1, 1, 1]),          # one spike never makes 2 of 5
    ([1, 9, 1, 8, 1, 1, 1], [-np.inf, 1, 1, 8, 8, 8, 1]),     # two within 5 ticks
    ([9, 1, 1, 1, 1, 9], [-np.inf, 1, 1, 1, 1, 1]),           # two 5 ticks apart: not in one window
])
def test_watched_is_the_second_largest_of_the_last_five(x, want) -> None:
    np.testing.assert_array_equal(sc.watched(np.asarray(x, float)), want)


def test_threshold_follows_the_gate() -> None:
    blk = {"calibration": {"quantiles": {"99.9": 5.7}}}
    assert sc.threshold({"state_energy": blk}) == (5.7, "held-out q99.9")
    cl = {"score": "state_energy", "alpha": 0.05, "rule": {"kind": "n_of_m", "n": 2, "m": 5},
          "bands": [{"from": 0, "mean": 0, "std": 1, "threshold": 443.0}]}
    assert sc.threshold({"state_energy": blk, "calibration": {"closed_loop": cl}}) == (443.0, "closed loop, alpha 0.05")
    # a closed loop for another score, or another rule, leaves the held-out quantile
    for other in ({**cl, "score": "energy"}, {**cl, "rule": {"kind": "n_of_m", "n": 3, "m": 5}}):
        assert sc.threshold({"state_energy": blk, "calibration": {"closed_loop": other}})[0] == 5.7
