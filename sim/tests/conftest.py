import pytest

from sim.client import BridgeProcess


@pytest.fixture(scope="session")
def bridge():
    """One lockstep bridge (button-press, 64x48 camera) shared by the tests."""
    # generous heartbeat timeout: the CI box is shared; the lapse has its own test
    with BridgeProcess("button-press", camera_size="64x48", seed=0, extra=["--heartbeat-timeout", "10"]) as b:
        yield b


@pytest.fixture(scope="session")
def arm(bridge):
    a = bridge.arm()
    yield a
    a.close()
