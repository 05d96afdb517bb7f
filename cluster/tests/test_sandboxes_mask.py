"""The trainer masks the sandbox reader's token in what a server sent, in any form a hostile
server can echo it (as the arena does, `domain::openenv::evidence::scrubbed`)."""

import base64

from arena_cluster.sandboxes import MASKED_RUN, masked

TOKEN = "hf_sandbox_reader_token_5a5a"


def test_a_credential_is_masked_in_any_form_a_server_can_echo_it():
    forms = [
        f"split: {TOKEN[:12]} | {TOKEN[12:]}",
        f"reversed: {TOKEN[::-1]}",
        "basic: Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode(),
        "shifted: " + base64.b64encode(f"x{TOKEN}".encode()).decode(),
        "url-safe: " + base64.urlsafe_b64encode(f"ab{TOKEN}".encode()).decode(),
        "hex: " + TOKEN.encode().hex(),
        "HEX: " + TOKEN.encode().hex().upper(),
        f"inside: Bearer{TOKEN}!",
    ]
    for text in forms:
        out = masked(text, [TOKEN])
        assert "***" in out, (text, out)
        assert not any(TOKEN[i:i + MASKED_RUN] in out for i in range(len(TOKEN) - MASKED_RUN + 1)), (text, out)
    assert masked("a token for the reader", [TOKEN]) == "a token for the reader"
    assert masked("short", ["abc"]) == "short", "a secret under 8 characters is none"
