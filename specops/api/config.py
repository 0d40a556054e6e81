"""What `specops config show` calls: every setting, its value and where it came from (specops.settings)."""

from __future__ import annotations

from typing import Any


def show() -> dict[str, Any]:
    """The settings as :func:`specops.settings.setting` resolves them without a flag (secrets redacted)."""
    from specops.settings import explain_settings

    return explain_settings()
