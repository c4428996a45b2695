"""``python -m tests.support.simserver --servers N --compression C``: see :mod:`.cluster`."""

from tests.support.simserver.cluster import main

main()
