//! The REST API the guide names, merged from every feature's router (`crate::FEATURES`). Every
//! route is declared with `#[utoipa::path]` and registered through `routes!`, so `/openapi.json` is
//! generated from the same code that serves it.

use axum::http::{Method, Uri};
use axum::routing::any;
use domain::ErrorCode;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::http::ApiError;
use crate::AppState;

#[derive(OpenApi)]
#[openapi(
    info(title = "Open Env Arena", description = "The arena's API. Errors are JSON: {code, message}."),
    tags((name = "challenges"), (name = "benchmarks"), (name = "arena"), (name = "identity"), (name = "board"), (name = "environments"), (name = "runs"), (name = "results"), (name = "gates"), (name = "openenv"), (name = "legacy")),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

/// Declares the HF token as a Bearer scheme in the document.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "hf_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A Hugging Face token"))
                    .build(),
            ),
        );
    }
}

/// Every route with a JSON body can answer 400 (`INVALID_JSON`), 413 (`PAYLOAD_TOO_LARGE`) and 415
/// (`UNSUPPORTED_MEDIA_TYPE`), every route with query parameters 400 (`INVALID_QUERY`), and every
/// route that takes a token 429 (`RATE_LIMITED`: too many tokens the arena has not seen): the
/// extractors' answers, documented once here rather than on each route.
pub fn document_extractor_errors(openapi: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    let error = |description: &str| {
        let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("ApiErrorBody"))).build();
        RefOr::T(ResponseBuilder::new().description(description).content("application/json", content).build())
    };
    for item in openapi.paths.paths.values_mut() {
        let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.delete, &mut item.patch];
        for op in operations.into_iter().flatten() {
            let query = op
                .parameters
                .as_ref()
                .is_some_and(|ps| ps.iter().any(|p| matches!(p.parameter_in, ParameterIn::Query)));
            let responses = &mut op.responses.responses;
            if op.request_body.is_some() {
                responses
                    .entry("400".into())
                    .or_insert_with(|| error("INVALID_JSON: the body is not JSON of this shape"));
                responses.entry("413".into()).or_insert_with(|| error("PAYLOAD_TOO_LARGE"));
                responses.entry("415".into()).or_insert_with(|| {
                    error("UNSUPPORTED_MEDIA_TYPE: send `Content-Type: application/json`")
                });
            }
            if query {
                responses.entry("400".into()).or_insert_with(|| error("INVALID_QUERY"));
            }
            if op.security.as_ref().is_some_and(|s| !s.is_empty()) {
                responses.entry("429".into()).or_insert_with(|| {
                    error("RATE_LIMITED: too many tokens the arena has not seen, from this address or in all; with Retry-After")
                });
            }
        }
    }
}

/// What utoipa's attributes cannot say: a post's `refs` name distinct messages (`uniqueItems`).
pub fn document_unique_refs(openapi: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::Schema;
    use utoipa::openapi::RefOr;
    let Some(components) = openapi.components.as_mut() else { return };
    if let Some(RefOr::T(Schema::Object(post))) = components.schemas.get_mut("PostRequest") {
        if let Some(RefOr::T(Schema::Array(refs))) = post.properties.get_mut("refs") {
            refs.unique_items = true;
        }
    }
}

pub fn router() -> OpenApiRouter<AppState> {
    let api = crate::FEATURES
        .iter()
        .fold(OpenApiRouter::with_openapi(ApiDoc::openapi()), |api, feature| api.merge((feature.router)()));
    // Anything else under /api answers JSON, never the HTML app.
    api.route("/api/{*rest}", any(unknown_route)).route("/api", any(unknown_route))
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route {method} {}", uri.path()))
}

/// Answers 405 on a known path with another method, in the API's error shape.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{} does not accept {method}", uri.path()))
}
