use serde_json::json;

use super::*;

fn body() -> Value {
    json!({
        "submission_id": "my-env-v1",
        "name": "My OpenEnv environment",
        "image": "ghcr.io/your-name/my-env:v1",
        "schema": {"action": {"type": "object", "properties": {"answer": {"type": "string"}}}, "observation": {"type": "object"}},
        "tasks": [{"task_id": "my-task", "split": "train", "reset_wall_s": 180, "rollout_wall_s": 1800, "verifier_wall_s": 120, "tool_wall_s": 120}],
        "example_actions": [{"answer": "example"}],
        "finish_action": {"answer": "done"},
        "source": "https://huggingface.co/datasets/your-name/my-env"
    })
}

fn code_of(body: Value) -> Option<ErrorCode> {
    let r = match parse(&body) {
        Ok(r) => r,
        Err(e) => return Some(e.code),
    };
    check_contract(&r)
        .and_then(|_| check_schema_shape(&r))
        .and_then(|_| image_references(&r).map(|_| ()))
        .err()
        .map(|e| e.code)
}

fn with(edit: impl Fn(&mut Value)) -> Value {
    let mut b = body();
    edit(&mut b);
    b
}

#[test]
fn the_guides_example_passes_and_gets_the_defaults() {
    let r = parse(&body()).unwrap();
    assert_eq!(code_of(body()), None);
    let t = &r.tasks[0];
    assert_eq!((t.tool_calls_total, t.context_tokens, t.memory_gib, t.workspace_gib), (128, 8192, 2, 10));
    let (refs, by_task) = image_references(&r).unwrap();
    assert_eq!(refs[0].canonical(), "ghcr.io/your-name/my-env:v1");
    assert_eq!(by_task["my-task"], 0);
}

#[test]
fn every_task_limit_of_the_table_is_enforced() {
    let over = [
        ("reset_wall_s", json!(119)),
        ("reset_wall_s", json!(301)),
        ("rollout_wall_s", json!(3601)),
        ("verifier_wall_s", json!(1801)),
        ("tool_wall_s", json!(121)),
        ("tool_calls_total", json!(1025)),
        ("tool_calls_per_minute", json!(61)),
        ("completion_tokens", json!(8193)),
        ("context_tokens", json!(16385)),
    ];
    for (field, value) in over {
        let b = with(|b| b["tasks"][0][field] = value.clone());
        assert_eq!(code_of(b), Some(ErrorCode::ContractInvalid), "{field} = {value}");
    }
    // Each within its limit, the three wall times together over 3600 s.
    let sum = with(|b| {
        b["tasks"][0]["reset_wall_s"] = json!(300);
        b["tasks"][0]["rollout_wall_s"] = json!(3000);
        b["tasks"][0]["verifier_wall_s"] = json!(400);
    });
    assert_eq!(code_of(sum), Some(ErrorCode::ContractInvalid));
    for (field, value) in [("memory_gib", 17), ("cpu_floor_vcpus", 3), ("workspace_gib", 45)] {
        let b = with(|b| b["tasks"][0][field] = json!(value));
        assert_eq!(code_of(b), Some(ErrorCode::EnvironmentTooLargeForSandbox), "{field}");
    }
    let at_limits = with(|b| {
        b["tasks"][0]["memory_gib"] = json!(16);
        b["tasks"][0]["cpu_floor_vcpus"] = json!(2);
        b["tasks"][0]["workspace_gib"] = json!(44);
        b["tasks"][0]["context_tokens"] = json!(16384);
    });
    assert_eq!(code_of(at_limits), None);
}

#[test]
fn the_contract_needs_a_train_task_unique_ids_and_its_counts() {
    let eval_only = with(|b| b["tasks"][0]["split"] = json!("eval"));
    assert_eq!(code_of(eval_only), Some(ErrorCode::ContractInvalid));
    let twice = with(|b| b["tasks"] = json!([b["tasks"][0], b["tasks"][0]]));
    assert_eq!(code_of(twice), Some(ErrorCode::ContractInvalid));
    let none = with(|b| b["tasks"] = json!([]));
    assert_eq!(code_of(none), Some(ErrorCode::ContractInvalid));
    let many: Vec<Value> = (0..51).map(|i| json!({"task_id": format!("t{i}"), "split": "train"})).collect();
    assert_eq!(code_of(with(|b| b["tasks"] = json!(many))), Some(ErrorCode::ContractInvalid));
    let actions: Vec<Value> = (0..17).map(|i| json!({"answer": i.to_string()})).collect();
    assert_eq!(code_of(with(|b| b["example_actions"] = json!(actions))), Some(ErrorCode::ContractInvalid));
    assert_eq!(code_of(with(|b| b["server_port"] = json!(49983))), Some(ErrorCode::ContractInvalid));
    assert_eq!(
        code_of(with(|b| b["source"] = json!("http://example.com"))),
        Some(ErrorCode::ContractInvalid)
    );
    assert_eq!(code_of(with(|b| b["extra"] = json!(1))), Some(ErrorCode::ContractInvalid));
    assert_eq!(
        code_of(with(|b| b["tasks"][0]["reset_wall_s"] = json!("slow"))),
        Some(ErrorCode::ContractInvalid)
    );
}

#[test]
fn reserved_shapes_and_schemas_that_are_not_objects_are_schema_invalid() {
    assert_eq!(
        code_of(with(|b| b["example_actions"] = json!([{"finish": true}]))),
        Some(ErrorCode::SchemaInvalid)
    );
    assert_eq!(
        code_of(with(|b| b["example_actions"] = json!([{"action": {"answer": "x"}}]))),
        Some(ErrorCode::SchemaInvalid)
    );
    assert_eq!(
        code_of(with(|b| b["finish_action"] = json!({"finish": true}))),
        Some(ErrorCode::SchemaInvalid)
    );
    assert_eq!(code_of(with(|b| b["schema"] = json!({"action": {}}))), Some(ErrorCode::SchemaInvalid));
    assert_eq!(code_of(with(|b| b["example_actions"] = json!(["text"]))), Some(ErrorCode::SchemaInvalid));
    // Not reserved: `finish` false, or `action` beside another field.
    assert!(!is_reserved(&json!({"finish": false})));
    assert!(!is_reserved(&json!({"action": {"a": 1}, "note": "x"})));
    assert!(!is_reserved(&json!({"action": "move"})));
}

#[test]
fn references_follow_dockers_grammar_on_two_registries() {
    let ok = [
        ("your-name/my-env:v1", "docker.io/your-name/my-env:v1"),
        ("ubuntu", "docker.io/library/ubuntu:latest"),
        ("docker.io/ubuntu:22.04", "docker.io/library/ubuntu:22.04"),
        ("index.docker.io/a/b", "docker.io/a/b:latest"),
        ("ghcr.io/org-name/env:v1", "ghcr.io/org-name/env:v1"),
        ("ghcr.io/a/b/c:1.0", "ghcr.io/a/b/c:1.0"),
    ];
    for (raw, canonical) in ok {
        assert_eq!(ImageRef::parse(raw).unwrap().canonical(), canonical, "{raw}");
    }
    let digest = format!("ghcr.io/a/b@sha256:{}", "ab".repeat(32));
    assert_eq!(ImageRef::parse(&digest).unwrap().canonical(), digest);
    let code = |raw: &str| ImageRef::parse(raw).err().map(|e| e.code);
    for raw in [
        "https://ghcr.io/a/b:v1",
        "user:pw@ghcr.io/a/b",
        "ghcr.io/Owner/b:v1",
        "ghcr.io/a/b:",
        "ghcr.io/onlyname",
        "ghcr.io/a/b@sha256:short",
        "",
        "a b",
    ] {
        assert_eq!(code(raw), Some(ErrorCode::ImageReferenceInvalid), "{raw}");
    }
    for raw in [
        "quay.io/a/b:v1",
        "registry.gitlab.com/a/b",
        "localhost:5000/a",
        "123456.dkr.ecr.us-east-1.amazonaws.com/a",
    ] {
        assert_eq!(code(raw), Some(ErrorCode::ImageRegistryUnsupported), "{raw}");
    }
    for raw in ["https://huggingface.co/spaces/a/b", "hf.co/datasets/a/b", "spaces/a/b", "a-b.hf.space"] {
        assert_eq!(code(raw), Some(ErrorCode::SubmissionFormatRetired), "{raw}");
    }
    let retired_body = with(|b| {
        b.as_object_mut().unwrap().remove("image");
        b["space_id"] = json!("a/b");
    });
    assert_eq!(code_of(retired_body), Some(ErrorCode::SubmissionFormatRetired));
}

#[test]
fn at_most_fifty_images_and_a_task_image_overrides_the_submissions() {
    let tasks: Vec<Value> = (0..50)
        .map(|i| json!({"task_id": format!("t{i}"), "split": "train", "image": format!("ghcr.io/a/img{i}:v1")}))
        .collect();
    let fifty = with(|b| b["tasks"] = json!(tasks));
    assert_eq!(
        code_of(fifty.clone()),
        Some(ErrorCode::ImageLimitExceeded),
        "50 task images and the submission's"
    );
    let r = parse(&with(|b| {
        b.as_object_mut().unwrap().remove("image");
        b["tasks"] = json!(tasks);
    }))
    .unwrap();
    let (refs, by_task) = image_references(&r).unwrap();
    assert_eq!((refs.len(), by_task["t7"]), (50, 7));
}

fn facts() -> ImageFacts {
    ImageFacts {
        digest: format!("sha256:{}", "1".repeat(64)),
        layers: vec![
            Layer { digest: "sha256:l1".into(), size: 100 },
            Layer { digest: "sha256:l2".into(), size: 50 },
        ],
        entrypoint: vec!["uvicorn".into()],
        cmd: vec!["server.app:app".into(), "--port".into(), "8000".into()],
        exposed_ports: vec!["8000/tcp".into()],
        labels: BTreeMap::new(),
        env: vec!["PATH=/usr/local/bin:/usr/bin:/bin".into(), "MODE=a=b".into()],
        workdir: "/app".into(),
        user: String::new(),
    }
}

#[test]
fn an_image_needs_a_start_command_one_port_and_a_bounded_size() {
    let summary = judge_image(&facts(), None, "i").unwrap();
    assert_eq!((summary.port, summary.compressed_bytes), (8000, 150));
    assert_eq!(summary.start.command, ["uvicorn", "server.app:app", "--port", "8000"]);
    let code = |f: ImageFacts, port: Option<u16>| judge_image(&f, port, "i").err().map(|e| e.code);
    assert_eq!(
        code(ImageFacts { entrypoint: vec![], cmd: vec![], ..facts() }, None),
        Some(ErrorCode::ImageServerInvalid)
    );
    let args = ImageFacts { cmd: (0..32).map(|i| i.to_string()).collect(), ..facts() };
    assert_eq!(code(args, None), Some(ErrorCode::ImageServerInvalid), "33 arguments");
    let long = ImageFacts { cmd: vec!["x".repeat(4096)], ..facts() };
    assert_eq!(code(long, None), Some(ErrorCode::ImageServerInvalid));
    let no_port = ImageFacts { exposed_ports: vec![], ..facts() };
    assert_eq!(code(no_port.clone(), None), Some(ErrorCode::ImageServerInvalid));
    assert_eq!(judge_image(&no_port, Some(7000), "i").unwrap().port, 7000, "server_port decides");
    let two = ImageFacts { exposed_ports: vec!["8000/tcp".into(), "9000/tcp".into()], ..facts() };
    assert_eq!(code(two, None), Some(ErrorCode::ImageServerInvalid));
    let reserved = ImageFacts { exposed_ports: vec!["49983/tcp".into()], ..facts() };
    assert_eq!(code(reserved, None), Some(ErrorCode::ImageServerInvalid));
    let big = ImageFacts {
        layers: vec![Layer { digest: "sha256:x".into(), size: MAX_IMAGE_BYTES + 1 }],
        ..facts()
    };
    assert_eq!(code(big, None), Some(ErrorCode::ImageCompressedSizeExceeded));
    let layers = (0..129).map(|i| Layer { digest: format!("sha256:{i}"), size: 1 }).collect();
    assert_eq!(code(ImageFacts { layers, ..facts() }, None), Some(ErrorCode::ImageCompressedSizeExceeded));
}

#[test]
fn a_sandbox_starts_with_the_images_entrypoint_then_cmd_and_its_env() {
    let start = sandbox_start(&facts()).unwrap();
    assert_eq!(start.command, ["uvicorn", "server.app:app", "--port", "8000"]);
    assert_eq!(start.env["PATH"], "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(start.env["MODE"], "a=b", "only the first `=` splits");
    let cmd_only =
        ImageFacts { entrypoint: vec![], cmd: vec!["sh".into(), "-c".into(), "serve".into()], ..facts() };
    assert_eq!(sandbox_start(&cmd_only).unwrap().command, ["sh", "-c", "serve"]);
    let later = ImageFacts { env: vec!["A=1".into(), "A=2".into(), "EMPTY".into()], ..facts() };
    let env = sandbox_start(&later).unwrap().env;
    assert_eq!((env["A"].as_str(), env["EMPTY"].as_str()), ("2", ""));
    for bad in ["=x", "1A=x", "A B=x"] {
        let f = ImageFacts { env: vec![bad.into()], ..facts() };
        assert_eq!(
            judge_image(&f, None, "i").err().map(|e| e.code),
            Some(ErrorCode::ImageServerInvalid),
            "{bad}"
        );
    }
    let empty_program = ImageFacts { entrypoint: vec![String::new()], ..facts() };
    assert!(sandbox_start(&empty_program).is_err());
    let many = ImageFacts { env: (0..129).map(|i| format!("V{i}=1")).collect(), ..facts() };
    assert!(sandbox_start(&many).is_err());
}

#[test]
fn an_exposed_url_is_picked_by_its_port_not_its_position() {
    let urls = vec![
        "https://abc--9000.hf.jobs".to_string(),
        "https://abc--8000.hf.jobs/".to_string(),
        "https://abc--80000.hf.jobs".to_string(),
    ];
    let three = [8000, 9000, 7000];
    assert_eq!(exposed_url(&urls, 8000, &three).as_deref(), Some("https://abc--8000.hf.jobs"));
    assert_eq!(exposed_url(&urls, 9000, &three).as_deref(), Some("https://abc--9000.hf.jobs"));
    assert_eq!(exposed_url(&urls, 7000, &three), None);
    // The marker counts in the host only.
    assert_eq!(exposed_url(&["https://evil.example/abc--7000.x".to_string()], 7000, &[7000, 1]), None);
    // A job that exposed one port and lists one URL: that URL, whatever its host.
    let loopback = ["http://127.0.0.1:41234/".to_string()];
    assert_eq!(exposed_url(&loopback, 8000, &[8000]).as_deref(), Some("http://127.0.0.1:41234"));
    assert_eq!(exposed_url(&loopback, 8000, &[8000, 9000]), None, "two ports: which one is unknown");
    assert_eq!(exposed_url(&loopback, 9000, &[8000]), None);
}

#[test]
fn shared_layers_count_once_toward_the_submissions_size() {
    let gib = 1u64 << 30;
    let image = |own: &str| ImageFacts {
        layers: vec![
            Layer { digest: "sha256:base".into(), size: 2 * gib },
            Layer { digest: own.into(), size: gib / 2 },
        ],
        ..facts()
    };
    let images: Vec<ImageFacts> = (0..20).map(|i| image(&format!("sha256:own{i}"))).collect();
    let refs: Vec<&ImageFacts> = images.iter().collect();
    assert_eq!(check_total_size(&refs).unwrap(), 2 * gib + 10 * gib, "the base once, twenty half-GiB layers");
    let more: Vec<ImageFacts> = (0..61).map(|i| image(&format!("sha256:own{i}"))).collect();
    let refs: Vec<&ImageFacts> = more.iter().collect();
    assert_eq!(check_total_size(&refs).err().map(|e| e.code), Some(ErrorCode::SubmissionSizeExceeded));
}
