"""An option's ``KEY=VALUE`` value read as the native side reads ``--set``
values (``concerto_sim``'s overrides): as a TOML value when it is one
(``32``, ``1e3``, ``true``, ``"x"``, ``[1, 2]``), else as the string it is
(``250ms``, ``ssd``). One reader, so that ``cluster up --set``, ``profile
--device`` and ``sim --set`` agree on what a value means."""

from __future__ import annotations

import tomllib
from typing import Any


def read(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
