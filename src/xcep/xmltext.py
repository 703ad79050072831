"""Text and attribute values written as XML: what ``xml.sax.saxutils``'s ``escape`` and
``quoteattr`` give, without importing it (it imports ``urllib.request``, and with it
``http.client``, ``email`` and ``ssl``: about 10 ms of every command's start)."""

from __future__ import annotations


def escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as entities."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(value: str) -> str:
    """An attribute value, escaped (newlines and tabs too) and quoted: in ``"`` unless it
    holds ``"`` and no ``'``; ``"`` as ``&quot;`` when it holds both."""
    value = escape(value).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    return '"' + value.replace('"', "&quot;") + '"'
