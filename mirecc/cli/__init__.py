"""``mire``: mirecc's own subcommands (``mire``), the main job and its bench
(``bench``), ``mire tune`` (``tune``) and ``mire embed`` (``embed``).

Layer 16 of the house, its top (``docs/layout.md``): may import every layer.
"""
