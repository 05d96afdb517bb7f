use axum::http::{Method, StatusCode};

use crate::on_both_backends;

on_both_backends!(unknown_ids_are_404_with_their_codes, |app| {
    let answer = app.get("/api/challenges/nope").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.json()["code"], "CHALLENGE_NOT_FOUND");
    assert!(answer.json()["message"].as_str().unwrap().contains("nope"));
    let answer = app.get("/api/benchmarks/nope").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.json()["code"], "BENCHMARK_NOT_FOUND");
});

on_both_backends!(unknown_api_routes_answer_json, |app| {
    for uri in ["/api/nope", "/api", "/api/challenges/openenv-9b/nope/deeper"] {
        let answer = app.get(uri).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(answer.json()["code"], "NOT_FOUND", "{uri}");
    }
});

on_both_backends!(wrong_methods_answer_json_405, |app| {
    let answer = app.request(Method::POST, "/api/challenges", Some("{}")).await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(answer.json()["code"], "METHOD_NOT_ALLOWED");
    let answer = app.request(Method::DELETE, "/api/arena/budget", None).await;
    assert_eq!(answer.json()["code"], "METHOD_NOT_ALLOWED");
});

on_both_backends!(bad_query_values_are_invalid_query, |app| {
    let answer = app.get("/api/results?legacy=maybe").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.json()["code"], "INVALID_QUERY");
});

on_both_backends!(openapi_is_generated_with_every_route, |app| {
    let answer = app.get("/openapi.json").await;
    assert_eq!(answer.status, StatusCode::OK);
    let json = answer.json();
    let paths = json["paths"].as_object().unwrap();
    for path in [
        "/api/challenges",
        "/api/challenges/{id}",
        "/api/benchmarks",
        "/api/benchmarks/{id}",
        "/api/formula",
        "/api/v2/challenges",
        "/api/arena/budget",
        "/api/version",
        "/api/experiment-groups",
        "/api/results",
        "/api/verification",
    ] {
        assert!(paths.contains_key(path), "{path} missing from /openapi.json");
    }
    assert!(json["components"]["schemas"]["ChallengeView"].is_object());
    assert!(json["components"]["schemas"]["ApiErrorBody"].is_object());
    // The document's codes are the wire strings the server answers, every one of them.
    let codes: Vec<&str> = json["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let wire: Vec<&str> = domain::ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(codes, wire);
});
