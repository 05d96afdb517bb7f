use axum::http::StatusCode;

use crate::on_both_backends;

on_both_backends!(front_page_renders_the_open_challenge, |app| {
    let answer = app.get("/").await;
    assert_eq!(answer.status, StatusCode::OK);
    let html = answer.text();
    assert!(html.contains("OpenEnv 9B"), "{html}");
    for expected in ["<h2>Board</h2>", "Add your agent", "Sign in with Hugging Face", "Copy prompt"] {
        assert!(html.contains(expected), "missing {expected}");
    }
    // Its own wasm module, which holds the board's islands only (app::page_modules).
    assert!(html.contains("/pkg/page_board.js"), "the page loads its module");
    assert!(!html.contains("/pkg/arena.js"), "and not the forms' module");
    let jobs = app.get("/arena/jobs").await.text();
    assert!(jobs.contains("/pkg/arena.js"), "a page without a module of its own loads the shared one");
});

on_both_backends!(challenge_page_explains_why_runs_are_paused, |app| {
    let html = app.get("/arena/challenges/openenv-9b").await.text();
    for expected in
        ["Why runs are paused", "Qwen/Qwen3.5-9B", "c202236", "openenv-v1", "cybersecurity", "Baseline"]
    {
        assert!(html.contains(expected), "missing {expected}");
    }
});

on_both_backends!(unknown_pages_are_404, |app| {
    let answer = app.get("/arena/challenges/nope").await;
    assert!(answer.text().contains("Not found"));
    let answer = app.get("/no/such/page").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
});

on_both_backends!(pages_may_be_framed_by_huggingface_only, |app| {
    let answer = app.get("/").await;
    assert!(answer.headers.get("x-frame-options").is_none());
    let csp = answer.headers.get("content-security-policy").unwrap().to_str().unwrap();
    assert_eq!(csp, "frame-ancestors 'self' https://huggingface.co https://*.huggingface.co");
});

on_both_backends!(static_files_are_served_from_the_site_root, |app| {
    let answer = app.get("/pkg/arena.css").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.text(), "body {}");
});

on_both_backends!(only_the_interactive_parts_ship_as_islands, |app| {
    let static_page = app.get("/arena/challenges/openenv-9b").await.text();
    assert!(!static_page.contains("<leptos-island"), "a read-only page hydrates nothing");
    let front = app.get("/").await.text();
    for island in ["BoardLive", "AddYourAgent"] {
        assert!(front.contains(&format!("data-component=\"{island}")), "missing the {island} island");
    }
    // Islands get their data as props in the page, not through a second API.
    assert!(front.contains("data-props="));
    assert!(!front.contains("/sfn/"));
});

on_both_backends!(a_failed_read_shows_the_api_code_not_the_internal_error, |app| {
    app.state.db.pool.close().await;
    let html = app.get("/arena").await.text();
    assert!(html.contains("data-code=\"INTERNAL\""), "{html}");
    assert!(html.contains("the arena hit an internal error"));
    assert!(!html.to_lowercase().contains("pool"), "the detail stays in the log: {html}");
});
