//! The browser's sign-in, driven over HTTP: the arena in-process, the HF stand-in on loopback.

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::harness::{Answer, TestApp};
use crate::on_both_backends;

fn session_cookie(answer: &Answer) -> Option<(String, String)> {
    answer.headers.get_all("set-cookie").iter().find_map(|v| {
        let text = v.to_str().ok()?.to_string();
        text.starts_with("arena_session=").then(|| (text.split(';').next().unwrap().to_string(), text))
    })
}

fn location(answer: &Answer) -> String {
    answer.headers["location"].to_str().unwrap().to_string()
}

/// Signs `user` in through /auth/login, the stand-in's chooser and /login/callback; returns the
/// session cookie and the CSRF token.
pub async fn sign_in(app: &TestApp, user: &str) -> (String, String) {
    let callback = complete_sign_in(app, "/auth/login?return_to=/arena", user).await;
    assert!(callback.status.is_redirection(), "{}", callback.text());
    assert_eq!(location(&callback), "/arena");
    let (cookie, _) = session_cookie(&callback).expect("sign-in issues a fresh session id");
    let info = app.call(Method::GET, "/auth/session", None, &[("cookie", &cookie)]).await.json();
    assert_eq!(info["user"]["name"], user);
    (cookie, info["csrf"].as_str().unwrap().to_string())
}

/// Starts a sign-in at `login_uri`, chooses `user` on the stand-in's page, and answers the
/// arena's callback; returns the callback's answer.
pub async fn complete_sign_in(app: &TestApp, login_uri: &str, user: &str) -> Answer {
    let login = app.get(login_uri).await;
    assert!(login.status.is_redirection(), "{}", login.text());
    let (cookie, _) = session_cookie(&login).expect("the login starts a session");
    let authorize = url::Url::parse(&location(&login)).unwrap();
    assert!(authorize.as_str().starts_with(&format!("{}/oauth/authorize", app.hub_url)));
    let mut form: Vec<(String, String)> = authorize.query_pairs().into_owned().collect();
    assert!(form.iter().any(|(k, v)| k == "code_challenge_method" && v == "S256"));
    assert!(form.iter().any(|(k, v)| k == "state" && !v.is_empty()));
    // The chooser submits the user's id; the stand-in derives `user-{name}` when none is set.
    form.push(("user".into(), format!("user-{user}")));
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let approved = client.post(format!("{}/oauth/authorize", app.hub_url)).form(&form).send().await.unwrap();
    assert!(approved.status().is_redirection());
    let back = url::Url::parse(approved.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(back.path(), "/login/callback");
    app.call(Method::GET, &format!("/login/callback?{}", back.query().unwrap()), None, &[("cookie", &cookie)])
        .await
}

on_both_backends!(sign_in_sets_a_framable_session_cookie, |app| {
    let login = app.get("/auth/login").await;
    let (_, attributes) = session_cookie(&login).unwrap();
    for attribute in ["HttpOnly", "SameSite=None", "Secure", "Partitioned"] {
        assert!(attributes.contains(attribute), "{attribute} missing from {attributes}");
    }
    let (cookie, _) = sign_in(app, "alice").await;
    let me = app.call(Method::GET, "/api/whoami", None, &[("cookie", &cookie)]).await.json();
    assert_eq!((me["name"].as_str(), me["via"].as_str()), (Some("alice"), Some("session")));
    let eve = sign_in(app, "eve").await.0;
    assert_eq!(app.call(Method::GET, "/api/whoami", None, &[("cookie", &eve)]).await.json()["editor"], true);
});

on_both_backends!(cookie_writes_need_the_csrf_token, |app| {
    let (cookie, csrf) = sign_in(app, "alice").await;
    let body =
        json!({"request_id": "alice-web-0001", "body": "from the page", "refs": [], "broadcast": false})
            .to_string();
    let without = app.call(Method::POST, "/api/board/messages", Some(&body), &[("cookie", &cookie)]).await;
    assert_eq!(
        (without.status, without.json()["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("CSRF_INVALID"))
    );
    let wrong = app
        .call(
            Method::POST,
            "/api/board/messages",
            Some(&body),
            &[("cookie", &cookie), ("x-csrf-token", "nope")],
        )
        .await;
    assert_eq!(wrong.json()["code"], "CSRF_INVALID");
    assert_eq!(app.scalar("SELECT COUNT(*) FROM messages").await, 0);
    let with = app
        .call(
            Method::POST,
            "/api/board/messages",
            Some(&body),
            &[("cookie", &cookie), ("x-csrf-token", &csrf)],
        )
        .await;
    assert_eq!(with.status, StatusCode::CREATED, "{}", with.text());
    assert_eq!(with.json()["message"]["author"], "alice");
});

on_both_backends!(sign_out_ends_the_session, |app| {
    let (cookie, csrf) = sign_in(app, "bob").await;
    let refused = app.call(Method::POST, "/auth/logout", None, &[("cookie", &cookie)]).await;
    assert_eq!(refused.json()["code"], "CSRF_INVALID", "sign-out is a write too");
    let out =
        app.call(Method::POST, "/auth/logout", None, &[("cookie", &cookie), ("x-csrf-token", &csrf)]).await;
    assert_eq!(out.status, StatusCode::NO_CONTENT);
    let after = app.call(Method::GET, "/api/whoami", None, &[("cookie", &cookie)]).await;
    assert_eq!(after.json()["code"], "AUTH_REQUIRED");
});

on_both_backends!(callback_refuses_forged_or_replayed_state, |app| {
    let login = app.get("/auth/login").await;
    let (cookie, _) = session_cookie(&login).unwrap();
    let forged =
        app.call(Method::GET, "/login/callback?code=abc&state=forged", None, &[("cookie", &cookie)]).await;
    assert_eq!(
        (forged.status, forged.json()["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("OAUTH_FAILED"))
    );
    // The pending sign-in was consumed by the failed attempt.
    let again =
        app.call(Method::GET, "/login/callback?code=abc&state=forged", None, &[("cookie", &cookie)]).await;
    assert!(again.json()["message"].as_str().unwrap().contains("no sign-in is in progress"));
    let no_session = app.get("/login/callback?code=abc&state=x").await;
    assert_eq!(no_session.json()["code"], "OAUTH_FAILED");
    let denied_login = app.get("/auth/login").await;
    let (cookie, _) = session_cookie(&denied_login).unwrap();
    let denied =
        app.call(Method::GET, "/login/callback?error=access_denied", None, &[("cookie", &cookie)]).await;
    assert!(denied.json()["message"].as_str().unwrap().contains("access_denied"));
});

on_both_backends!(return_to_stays_on_this_site, |app| {
    for hostile in ["https://evil.example/", "//evil.example/x", "/\\evil.example"] {
        let login = app.get(&format!("/auth/login?return_to={}", urlencode(hostile))).await;
        assert!(login.status.is_redirection());
    }
    // The safe path is only used after a real sign-in; see sign_in() for the happy path.
});

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

on_both_backends!(handoff_codes_work_once, |app| {
    let bad = app.request(Method::POST, "/auth/handoff", Some(r#"{"code":"made-up"}"#)).await;
    assert_eq!((bad.status, bad.json()["code"].as_str()), (StatusCode::BAD_REQUEST, Some("HANDOFF_INVALID")));
    // A popup sign-in ends on a page that carries a code for the framed opener.
    let page = complete_sign_in(app, "/auth/login?popup=1", "alice").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.text();
    assert!(html.contains("arena-signed-in"));
    let code = html.split("code: \"").nth(1).unwrap().split('"').next().unwrap().to_string();
    let body = json!({"code": code}).to_string();
    // A fresh browser context (the framed page) redeems it.
    let redeemed = app.request(Method::POST, "/auth/handoff", Some(&body)).await;
    assert_eq!(redeemed.status, StatusCode::NO_CONTENT);
    let (framed_cookie, _) = session_cookie(&redeemed).unwrap();
    let me = app.call(Method::GET, "/auth/session", None, &[("cookie", &framed_cookie)]).await.json();
    assert_eq!(me["user"]["name"], "alice");
    let replay = app.request(Method::POST, "/auth/handoff", Some(&body)).await;
    assert_eq!(replay.json()["code"], "HANDOFF_INVALID");
});

on_both_backends!(sign_in_never_returns_off_site, |app| {
    for hostile in ["/\t/evil.example", "//evil.example", "https://evil.example/"] {
        let done =
            complete_sign_in(app, &format!("/auth/login?return_to={}", urlencode(hostile)), "bob").await;
        assert_eq!(location(&done), "/", "{hostile:?}");
    }
});

on_both_backends!(handoff_refuses_other_origins, |app| {
    let answer = app
        .call(Method::POST, "/auth/handoff", Some(r#"{"code":"x"}"#), &[("origin", "https://evil.example")])
        .await;
    assert_eq!(
        (answer.status, answer.json()["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("CSRF_INVALID"))
    );
    let origin = app.state.public_url.clone();
    let own = app.call(Method::POST, "/auth/handoff", Some(r#"{"code":"x"}"#), &[("origin", &origin)]).await;
    assert_eq!(own.json()["code"], "HANDOFF_INVALID", "the arena's own origin gets as far as the code check");
});

// A session is refused once its account is one of the arena's own: listed by an organizer (a
// server restarted with the new list), or a member of the sandbox namespace since it signed in
// (found at the next re-check with HF). Tokens are refused the same way (`hostile.rs`).
#[tokio::test]
async fn a_session_ends_when_its_account_becomes_one_of_the_arenas_own() {
    let start = time::macros::datetime!(2026-11-30 12:00 UTC);
    let clock = std::sync::Arc::new(server::ports::clock::FixedClock::new(start));
    let options = crate::harness::Options { clock: Some(clock.clone()), ..Default::default() };
    let app = TestApp::with(crate::harness::Backend::Sqlite, options).await;
    let (alice, _) = sign_in(&app, "alice").await;
    let (bob, csrf) = sign_in(&app, "bob").await;
    async fn whoami(app: &TestApp, cookie: &str) -> Answer {
        app.call(Method::GET, "/api/whoami", None, &[("cookie", cookie)]).await
    }
    let code = |a: &Answer| (a.status.as_u16(), a.json()["code"].as_str().unwrap_or("").to_string());
    assert_eq!(whoami(&app, &alice).await.status, StatusCode::OK);
    assert_eq!(whoami(&app, &bob).await.status, StatusCode::OK);

    let listed = app.replica_with(|c| c.service_accounts.push("user-alice".into())).await;
    let refused = whoami(&listed, &alice).await;
    assert_eq!(code(&refused), (403, "SERVICE_ACCOUNT".into()), "{}", refused.text());
    assert_eq!(whoami(&listed, &bob).await.status, StatusCode::OK, "another account is not");

    app.hub.join_org("bob", standin::users::SANDBOX_ORG, "read");
    assert_eq!(whoami(&app, &bob).await.status, StatusCode::OK, "not re-checked yet");
    clock.advance(time::Duration::seconds(301));
    let refused = whoami(&app, &bob).await;
    assert_eq!(code(&refused), (403, "SERVICE_ACCOUNT".into()), "{}", refused.text());
    let hook = Some(r#"{"url":"https://example.com/h"}"#);
    let write =
        app.call(Method::POST, "/api/webhooks", hook, &[("cookie", &bob), ("x-csrf-token", &csrf)]).await;
    assert_eq!(code(&write), (403, "SERVICE_ACCOUNT".into()), "a write too: {}", write.text());
    assert_eq!(app.scalar("SELECT COUNT(*) FROM webhooks").await, 0);
    listed.finish().await;
    app.finish().await;
}

// A session's editor role is confirmed with HF as often as a token's whoami is reused (5 min):
// once HF no longer accepts the person's OAuth token, the role is gone from the session.
#[tokio::test]
async fn a_sessions_editor_role_is_rechecked_with_hf() {
    let start = time::macros::datetime!(2026-11-30 12:00 UTC);
    let clock = std::sync::Arc::new(server::ports::clock::FixedClock::new(start));
    let options = crate::harness::Options { clock: Some(clock.clone()), ..Default::default() };
    let app = TestApp::with(crate::harness::Backend::Sqlite, options).await;
    let (eve, _) = sign_in(&app, "eve").await;
    let cookie = [("cookie", eve.as_str())];
    let jobs = || app.call(Method::GET, "/api/jobs", None, &cookie);
    assert_eq!(jobs().await.status, StatusCode::OK, "an editor");
    app.hub.revoke_oauth_tokens();
    clock.advance(time::Duration::seconds(299));
    assert_eq!(jobs().await.status, StatusCode::OK, "not re-checked yet");
    let calls = app.hub.whoami_calls();
    clock.advance(time::Duration::seconds(2));
    assert_eq!(jobs().await.status, StatusCode::FORBIDDEN, "HF no longer accepts the token");
    assert_eq!(app.hub.whoami_calls() - calls, 1, "one HF call");
    let me = app.call(Method::GET, "/api/whoami", None, &[("cookie", &eve)]).await.json();
    assert_eq!((me["name"].as_str(), me["editor"].as_bool()), (Some("eve"), Some(false)), "still signed in");
    assert_eq!(app.hub.whoami_calls() - calls, 1, "the outcome is kept in the session");
    app.finish().await;
}
