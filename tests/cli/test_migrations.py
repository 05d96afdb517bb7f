"""The two migration trees pair up as migrations/README.md says: every migration has a twin of the
same name in the other tree, except PostgreSQL's change notifications; numbers agree from 0017 on,
and below it differ by the one PostgreSQL-only migration. Needs no server."""

import re
from pathlib import Path

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
ONLY_POSTGRES = {"change_notifications"}
ALIGNED_FROM = 17


def tree(backend):
    named = {}
    for f in sorted((MIGRATIONS / backend).glob("*.sql")):
        m = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", f.name)
        assert m, "a migration is named NNNN_name.sql: %s" % f
        assert m.group(2) not in named, "two %s migrations named %s" % (backend, m.group(2))
        named[m.group(2)] = int(m.group(1))
    return named


def test_every_migration_has_its_twin_and_new_ones_share_their_number():
    sqlite, postgres = tree("sqlite"), tree("postgres")
    assert set(postgres) - set(sqlite) == ONLY_POSTGRES
    assert set(sqlite) - set(postgres) == set()
    for name, number in sqlite.items():
        twin = postgres[name]
        if twin >= ALIGNED_FROM or number >= ALIGNED_FROM:
            assert twin == number, (name, number, twin)
        else:
            # Below 0017, PostgreSQL's change notifications (its 0004) sit between them.
            assert twin == number + (1 if number >= postgres["change_notifications"] else 0), (name, number, twin)
