"""energyflow.palette: the colours a camera bundle's demonstrations showed, written into its manifest."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from energyflow import palette as P
from energyflow.bundle import read_manifest

ROOT = Path(__file__).resolve().parents[2]
CAMERA_BUNDLE = ROOT / "bundles" / "metaworld-button-press-camera"
TABLE, RED, BLUE = (120, 80, 40), (200, 20, 20), (40, 70, 220)


def _frame(colour=TABLE, box=None, size=96):
    img = np.zeros((size, size, 3), np.uint8)
    img[:] = colour
    img[:8, :8] = RED
    if box is not None:
        img[40:43, 50:53] = box
    return img


def _demos(path, n=10, size=96, camera_name="topview", key="camera"):
    import h5py

    with h5py.File(path, "w") as f:
        g = f.create_group("data")
        g.attrs["camera_name"] = camera_name
        for i in range(n):
            # the last demo shows a blue box: held out, it is its palette's false alarm
            fr = [_frame(box=BLUE if i == n - 1 else None, size=size) for _ in range(3)]
            g.create_dataset(f"demo_{i}/obs/{key}", data=np.stack(fr))


def test_layout_matches_the_runtime():
    # camera.TestPaletteLayout checks the same cell: (128, 80, 40) at 16 levels is
    # cell 2130, bit 2 of byte 266
    assert int(P.cell_index(np.array([128, 80, 40], np.uint8), 16)) == 2130
    seen = np.zeros(4096, bool)
    seen[2130] = True
    raw = np.frombuffer(__import__("base64").b64decode(P.encode(seen)), np.uint8)
    assert len(raw) == 512 and raw[266] == 1 << 2 and raw.sum() == 4
    assert np.array_equal(P.decode(P.encode(seen), 16), seen)


@pytest.mark.parametrize("levels", [2, 16, 64])
def test_unseen_counts_pixels_outside_the_seen_cells(levels):
    seen, n = P.seen_cells([np.stack([_frame(), _frame()])], levels)
    assert n == 2 and seen.sum() == len({int(P.cell_index(np.array(c, np.uint8), levels)) for c in (TABLE, RED)})
    u = P.unseen_pixels(np.stack([_frame(), _frame(box=BLUE)]), seen, levels)
    assert u[0] == 0 and u[1] == (9 if not seen[P.cell_index(np.array(BLUE, np.uint8), levels)] else 0)


def test_build_writes_the_palette_and_its_held_out_reading(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(CAMERA_BUNDLE, b)
    _demos(tmp_path / "d.hdf5")
    block = P.build(b, tmp_path / "d.hdf5", levels=16, grow=0, held_out=0.1)
    assert block["frames"] == 27 and block["held_out"] == {"frames": 3, "max_unseen": 9}
    man = read_manifest(b)  # the file hashes still hold
    cam = [o for o in man["obs"] if o["kind"] == "image"][0]
    assert cam["palette"] == block
    assert P.decode(block["seen"], 16).sum() == 2


@pytest.mark.parametrize("demos, want", [
    (dict(size=64), "the bundle's camera is 96x96"),
    (dict(camera_name="corner2"), "recorded with camera 'corner2'"),
    (dict(key="wrist"), "no obs/camera"),
    (dict(n=1), "want at least 2"),
])
def test_build_refuses(tmp_path, demos, want):
    b = tmp_path / "b"
    shutil.copytree(CAMERA_BUNDLE, b)
    before = (b / "manifest.json").read_text()
    _demos(tmp_path / "d.hdf5", **demos)
    with pytest.raises(P.PaletteError, match=want):
        P.build(b, tmp_path / "d.hdf5")
    assert (b / "manifest.json").read_text() == before  # nothing written


def test_build_refuses_a_bundle_without_an_image(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(ROOT / "bundles" / "metaworld-button-press", b)
    _demos(tmp_path / "d.hdf5")
    with pytest.raises(P.PaletteError, match="one image input, got 0"):
        P.build(b, tmp_path / "d.hdf5")
    with pytest.raises(P.PaletteError, match="levels 12"):
        P.cell_index(np.zeros((1, 3), np.uint8), 12)


def test_grow_marks_the_cells_one_step_along_a_channel():
    seen = np.zeros(16 ** 3, bool)
    seen[(8 * 16 + 5) * 16 + 2] = True
    g = P.grow_cells(seen, 16, 1).reshape(16, 16, 16)
    assert g.sum() == 7 and g[7, 5, 2] and g[9, 5, 2] and g[8, 4, 2] and g[8, 6, 2] and g[8, 5, 1] and g[8, 5, 3]
    assert not g[9, 6, 2]  # diagonal: two channels
    assert P.grow_cells(seen, 16, 2).sum() == 25
    corner = np.zeros(8, bool)
    corner[0] = True
    assert P.grow_cells(corner, 2, 1).sum() == 4  # the cube's edge clips


def test_grow_keeps_a_new_colour_unseen(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(CAMERA_BUNDLE, b)
    _demos(tmp_path / "d.hdf5")
    block = P.build(b, tmp_path / "d.hdf5", levels=16, grow=1)
    assert block["grow"] == 1 and P.decode(block["seen"], 16).sum() == 14
    assert block["held_out"]["max_unseen"] == 9  # blue is far from the table and the red


def test_build_watch_writes_the_watch_camera_and_leaves_the_image_input(tmp_path):
    b = tmp_path / "b"
    shutil.copytree(CAMERA_BUNDLE, b)
    own_before = [o for o in read_manifest(b)["obs"] if o["kind"] == "image"][0]
    _demos(tmp_path / "d.hdf5", size=64, camera_name="corner")
    block = P.build(b, tmp_path / "d.hdf5", levels=16, grow=0, held_out=0.1, watch=True)
    man = read_manifest(b)  # the file hashes still hold
    assert man["watch_camera"] == {"camera": {"name": "corner", "width": 64, "height": 64}, "palette": block}
    assert [o for o in man["obs"] if o["kind"] == "image"][0] == own_before
    assert block["frames"] == 27 and block["held_out"] == {"frames": 3, "max_unseen": 9}


@pytest.mark.parametrize("demos, want", [
    (dict(camera_name="topview"), "the policy's own camera"),
    (dict(camera_name="corner", key="wrist"), "no obs/camera"),
])
def test_build_watch_refuses(tmp_path, demos, want):
    b = tmp_path / "b"
    shutil.copytree(CAMERA_BUNDLE, b)
    before = (b / "manifest.json").read_text()
    _demos(tmp_path / "d.hdf5", **demos)
    with pytest.raises(P.PaletteError, match=want):
        P.build(b, tmp_path / "d.hdf5", watch=True)
    assert (b / "manifest.json").read_text() == before  # nothing written


def test_runtime_rgb_decodes_as_the_runtime_does():
    # camera.TestFramesRuntimeGolden pins the runtime's decoding of these 4:2:0 frames
    frames = sorted((ROOT / "camera" / "testdata" / "frames").glob("*.jpg"))
    golden = np.fromfile(ROOT / "camera" / "testdata" / "frames_runtime.rgb", np.uint8).reshape(len(frames), 120, 160, 3)
    ours = np.stack([P.runtime_rgb(f.read_bytes()) for f in frames]).astype(int)
    from PIL import Image

    libjpeg = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in frames]).astype(int)
    d, dl = np.abs(ours - golden), np.abs(libjpeg - golden)
    assert d.max() <= 3 and (d > 0).mean() < 0.05, (d.max(), (d > 0).mean())
    assert dl.max() > 20 and (dl > 0).mean() > 0.2  # what the recorder's decoding differs by
    odd = ROOT / "camera" / "testdata" / "odd_97x95.jpg"  # odd sizes: the last chroma sample covers one pixel
    golden = np.fromfile(ROOT / "camera" / "testdata" / "odd_97x95_runtime.rgb", np.uint8).reshape(95, 97, 3)
    d = np.abs(P.runtime_rgb(odd.read_bytes()).astype(int) - golden)
    assert d.max() <= 3 and (d > 0).mean() < 0.05, (d.max(), (d > 0).mean())


def test_runtime_rgb_refuses_what_it_cannot_decode_as_the_runtime():
    import io

    from PIL import Image

    for sub, want in ((1, "4:2:2"),):
        b = io.BytesIO()
        Image.fromarray(_frame()).save(b, format="JPEG", quality=90, subsampling=sub)
        with pytest.raises(P.PaletteError, match=want):
            P.runtime_rgb(b.getvalue())
    b = io.BytesIO()
    Image.fromarray(_frame()).save(b, format="JPEG", quality=90, subsampling=0)  # 4:4:4: no chroma to repeat
    x = P.runtime_rgb(b.getvalue())
    assert x.shape == (96, 96, 3) and np.abs(x.astype(int) - np.asarray(Image.open(b).convert("RGB"))).max() <= 3
    b = io.BytesIO()
    Image.fromarray(_frame()).convert("L").save(b, format="JPEG")
    with pytest.raises(P.PaletteError, match="colour JPEG"):
        P.runtime_rgb(b.getvalue())


def test_build_decodes_the_jpeg_frames_as_the_runtime_does(tmp_path):
    import io

    import h5py
    from PIL import Image

    def jpeg(img):
        b = io.BytesIO()
        Image.fromarray(img).save(b, format="JPEG", quality=90)
        return np.frombuffer(b.getvalue(), np.uint8)

    with h5py.File(tmp_path / "d.hdf5", "w") as f:
        g = f.create_group("data")
        g.attrs["camera_name"] = "corner"
        for i in range(4):
            o = g.create_group(f"demo_{i}/obs")
            o.create_dataset("camera", data=np.zeros((2, 96, 96, 3), np.uint8))  # not what is read
            jp = o.create_dataset("camera_jpeg", (2,), dtype=h5py.vlen_dtype(np.uint8))
            for k in range(2):
                jp[k] = jpeg(_frame())
    b = tmp_path / "b"
    shutil.copytree(CAMERA_BUNDLE, b)
    block = P.build(b, tmp_path / "d.hdf5", levels=16, grow=0, held_out=0.25, watch=True)
    assert block["decoded"] == "runtime" and block["frames"] == 6
    seen = P.decode(block["seen"], 16)
    assert seen[P.cell_index(P.runtime_rgb(jpeg(_frame()).tobytes()), 16)].all()
    assert not seen[P.cell_index(np.zeros(3, np.uint8), 16)]  # the recorded pixels were not read
    with h5py.File(tmp_path / "d.hdf5", "a") as f:  # demonstrations recorded two ways are refused
        del f["data/demo_3/obs/camera_jpeg"]
    with pytest.raises(P.PaletteError, match="3 of 4 demonstrations keep their JPEG frames"):
        P.build(b, tmp_path / "d.hdf5", watch=True)
