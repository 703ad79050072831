import os
from pathlib import Path

import pytest
from hypothesis import settings

DATA = Path(
    os.environ.get("XCEP_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "xmark").is_dir():
        pytest.skip(f"shared data not found at {DATA} (set XCEP_DATA)")
    return DATA


# Shared, noisy machines: no per-example deadline (speed lives in bench/, not in tests).
settings.register_profile("xcep", deadline=None, print_blob=True)
settings.load_profile("xcep")


@pytest.fixture(scope="session")
def spark():
    """One local[2] Spark session for every Spark test (UI off, few shuffle partitions)."""
    from xcep.spark.session import session

    conf = {"spark.sql.shuffle.partitions": 2, "spark.driver.memory": "2g"}
    spark = session("local[2]", "xcep-tests", conf=conf)
    yield spark
    spark.stop()


@pytest.fixture(autouse=True)
def _spark_cache_cleared(request):
    """After a test that used the shared session, what it cached is let go (XSCL caches
    its numbered documents): the tests do not add up in the driver's memory."""
    yield
    if "spark" in request.fixturenames:
        request.getfixturevalue("spark").catalog.clearCache()


@pytest.fixture(scope="session")
def saxon():
    """``saxon(query, xml)``: Saxon-HE's result items (``saxonche``), each serialized,
    with ``xml`` as the context item: the XQuery peer of the differential tests."""
    saxonche = pytest.importorskip("saxonche")
    processor = saxonche.PySaxonProcessor(license=False)

    def run(query: str, xml: str) -> list[str]:
        engine = processor.new_xquery_processor()
        engine.set_context(xdm_item=processor.parse_xml(xml_text=xml))
        engine.set_query_content(query)
        value = engine.run_query_to_value()
        return [] if value is None else [str(value.item_at(i)) for i in range(value.size)]

    return run
