import os
from pathlib import Path

import pytest

DATA = Path(
    os.environ.get("XCEP_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "xmark").is_dir():
        pytest.skip(f"shared data not found at {DATA} (set XCEP_DATA)")
    return DATA
