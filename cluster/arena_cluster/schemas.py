"""Action schemas are data, never addresses. A submission's schema (and each held-out
environment's) comes with the JSON Schema draft the arena decided for it (`schema_draft`), and is
compiled with that draft's validator class explicitly (never from its own `$schema`) and a
`referencing.Registry` that retrieves nothing: a `$ref`, `$dynamicRef` or `$recursiveRef` to
anything outside the schema (a `file://` path, an `http://` address, …) is unresolvable, never
fetched. jsonschema's default registry would fetch it with urllib.

Checking a reply never raises: a schema that cannot be applied to an action (an unresolvable
reference, a reference loop that recurses without end, …) makes the reply invalid with a fixed
sentence, so that episode ends `invalid_reply` and the run goes on. The sentence is fixed: an
exception's text could carry what the schema's author chose to put there.
"""

from __future__ import annotations

import jsonschema
from referencing import Registry
from referencing.exceptions import NoSuchResource

DRAFTS = {
    "draft4": jsonschema.Draft4Validator,
    "draft6": jsonschema.Draft6Validator,
    "draft7": jsonschema.Draft7Validator,
    "draft2019-09": jsonschema.Draft201909Validator,
    "draft2020-12": jsonschema.Draft202012Validator,
}
UNCHECKABLE = "the action schema cannot be applied to it (a reference outside the schema, or one that never ends)"


def _refuse(uri: str):
    """The registry's only way to find a resource it does not hold: none is ever retrieved."""
    raise NoSuchResource(ref=uri)


NO_RETRIEVAL = Registry(retrieve=_refuse)


def draft_refusal(draft) -> str | None:
    """Why `draft` is not one the trainer compiles with; None when it is."""
    if draft is None:
        return "has no schema_draft"
    if draft not in DRAFTS:
        return f"has schema_draft {str(draft)[:40]!r}, not one of {', '.join(DRAFTS)}"
    return None


def validator(schema, draft: str):
    """`valid(action) -> str | None` (the reason the action is invalid, or None) for `schema`
    under `draft`'s rules. Raises ValueError for a draft that is not one of `DRAFTS`."""
    why = draft_refusal(draft)
    if why:
        raise ValueError(f"the schema {why}")
    v = DRAFTS[draft](schema, registry=NO_RETRIEVAL)

    def valid(action) -> str | None:
        try:
            err = jsonschema.exceptions.best_match(v.iter_errors(action))
        except Exception:  # noqa: BLE001 - unresolvable, recursion, a malformed schema: all the same sentence
            return UNCHECKABLE
        return None if err is None else err.message

    return valid
