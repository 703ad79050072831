"""xcep's XML text and attribute writers give what the standard library's give."""

from __future__ import annotations

from xml.sax import saxutils

from hypothesis import given
from hypothesis import strategies as st

from xcep.xmltext import escape, quoteattr

TEXT = st.text(alphabet=st.sampled_from("ab&<>\"'\n\r\t é"), max_size=12) | st.text()


@given(TEXT)
def test_text_and_attributes_are_written_as_saxutils_writes_them(text):
    assert escape(text) == saxutils.escape(text)
    assert quoteattr(text) == saxutils.quoteattr(text)
