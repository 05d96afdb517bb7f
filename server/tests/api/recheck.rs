//! Collections stored under an earlier gates version are re-checked from their pinned commit, and
//! the record and its page say which version judged them. Both backends.

use serde_json::{json, Value};

use crate::harness::{fixture, TestApp, ALICE, BOB};
use crate::on_both_backends;

async fn submitted(app: &TestApp, repo: &str, token: &str) -> String {
    app.publish("datasets", repo, &fixture("good"));
    let body = json!({"agent_id": null, "challenge_id": "local-demo", "repo_type": "dataset", "repo_id": repo,
        "revision": "main", "entry_path": "", "title": repo, "notes": ""});
    let r = app.post_as("/api/environments", &body.to_string(), token).await;
    assert!(r.status.is_success(), "{}", r.text());
    r.json()["environment_id"].as_str().unwrap().to_string()
}

async fn record(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/api/environments/{id}")).await.json()["environment"].clone()
}

on_both_backends!(local, a_collection_judged_by_older_gates_is_rechecked_from_its_pinned_commit, |app| {
    let current = domain::gates::GATES_VERSION;
    let kept = submitted(app, "alice/pack", ALICE).await;
    let gone = submitted(app, "bob/pack", BOB).await;
    assert_eq!(server::collections::service::recheck_pass(&app.state).await.unwrap(), 0, "all current");
    app.exec("UPDATE environments SET gates_version = 'gates-v3'").await.unwrap();
    // Bob's repository vanishes after he submitted it.
    std::fs::remove_dir_all(app.repos.join("datasets").join("bob/pack")).unwrap();

    assert_eq!(server::collections::service::recheck_pass(&app.state).await.unwrap(), 1);
    let r = record(app, &kept).await;
    assert_eq!(
        (r["gates_version"].clone(), r["first_gates_version"].clone(), r["recheck_error"].clone()),
        (json!(current), json!("gates-v3"), Value::Null),
        "{r:#}"
    );
    assert!(r["rechecked_at"].is_string());
    let stored = app.get(&format!("/api/environments/{kept}")).await.json();
    assert_eq!(stored["validation"]["quality_gates"]["static"]["version"], current);
    let page = app.get(&format!("/arena/submissions/{kept}")).await.text();
    assert!(page.contains("re-checked from the pinned commit"), "the page says which version judged it");

    let g = record(app, &gone).await;
    assert_eq!(g["gates_version"], "gates-v3", "still judged by the old gates: {g:#}");
    assert!(g["recheck_error"].as_str().unwrap().contains("can no longer be read"), "{g:#}");
    let page = app.get(&format!("/arena/submissions/{gone}")).await.text();
    assert!(page.contains("could not be made"));
    // Tried again a day later, not on every pass.
    let sql = format!("SELECT recheck_epoch FROM environments WHERE id = '{gone}'");
    let first = app.scalar(&sql).await;
    assert_eq!(server::collections::service::recheck_pass(&app.state).await.unwrap(), 0);
    assert_eq!(app.scalar(&sql).await, first, "not tried again within the day");
    app.exec("UPDATE environments SET recheck_epoch = recheck_epoch - 90000").await.unwrap();
    assert_eq!(server::collections::service::recheck_pass(&app.state).await.unwrap(), 0);
    assert!(app.scalar(&sql).await > first - 90000, "tried again once the day had passed");
});
