"""Places where the served guide names something the service must answer: the legacy page it links,
the legacy catalogue, and every route the guide's `/AGENTS-legacy.md` mentions."""

import json
import re
import urllib.request


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def test_the_legacy_page_the_guide_links_is_served(arena_url):
    status, _, guide = get(arena_url + "/AGENTS.md")
    assert status == 200
    assert "/AGENTS-legacy.md" in guide
    status, _, legacy = get(arena_url + "/AGENTS-legacy.md")
    assert status == 200
    assert legacy.startswith("# Open Env Arena: legacy routes (retired)")
    # Every API route it names answers JSON.
    routes = sorted(set(re.findall(r"`GET (/api/[a-z/-]+)`", legacy)))
    assert "/api/arena/competitions" in routes and "/api/results" in routes, routes
    for route in routes:
        status, kind, body = get(arena_url + route)
        assert status == 200 and kind.startswith("application/json"), route
        json.loads(body)


def test_the_legacy_competitions_catalogue_is_empty(arena_url):
    status, _, body = get(arena_url + "/api/arena/competitions")
    assert status == 200
    assert json.loads(body)["competitions"] == []
