"""Test helper run as a separate process: append COUNT events with subject PREFIX to the registry at URL.

Prints one line per committed row ("committed PREFIX I") so the parent knows what is durable.
"""

import sys

from specops.registry import open_registry


def main() -> None:
    url, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reg = open_registry(url)
    for i in range(count):
        reg.record_event("test.row", prefix, str(i))
        print(f"committed {prefix} {i}", flush=True)


if __name__ == "__main__":
    main()
