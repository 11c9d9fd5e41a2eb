//! Routes and their OpenAPI document, registered together: each route names the types of
//! its query, its body and its answer, so `/v1/openapi.json` is generated from the same
//! types the handlers take and return, never written by hand.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::http::StatusCode;
use axum::routing::{MethodFilter, on};
use baton_core::key::Scope;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};
use tower_http::timeout::TimeoutLayer;

use crate::Server;
use crate::error::ErrorBody;
use baton_app::ops::{self, Operation};

/// Every handler is bounded in time: an operation that waits by what it may wait (at most
/// [`ops::MAX_WAIT`]) and a little more, everything else by its store's busy timeout well
/// within 30 s.
fn bounded(
    waits: bool,
    route: axum::routing::MethodRouter<Arc<Server>>,
) -> axum::routing::MethodRouter<Arc<Server>> {
    let bound = if waits {
        ops::MAX_WAIT + Duration::from_secs(10)
    } else {
        Duration::from_secs(30)
    };
    route.layer(TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        bound,
    ))
}

/// A part of a request the document describes: a JSON Schema, or [`Nothing`].
pub trait Part {
    fn schema(generator: &mut SchemaGenerator) -> Option<Schema>;
}

/// No query, or no body.
pub struct Nothing;

impl Part for Nothing {
    fn schema(_: &mut SchemaGenerator) -> Option<Schema> {
        None
    }
}

impl<T: JsonSchema> Part for T {
    fn schema(generator: &mut SchemaGenerator) -> Option<Schema> {
        Some(generator.subschema_for::<T>())
    }
}

/// The router being built and the document describing it.
pub struct Api {
    router: Router<Arc<Server>>,
    generator: SchemaGenerator,
    /// Query parameters are spelled out one by one, so their types are read inline.
    inline: SchemaGenerator,
    paths: Map<String, Value>,
}

impl Api {
    pub fn new() -> Self {
        let settings = SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = "#/components/schemas/".into();
        });
        let inline = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
        Self {
            router: Router::new(),
            generator: settings.into_generator(),
            inline: inline.into_generator(),
            paths: Map::new(),
        }
    }

    /// Routes `method path` to `handler` and documents it: `Q` is its query, `B` its JSON
    /// body (either may be [`Nothing`]) and `R` what it answers; `scope` is the key scope it
    /// needs (`None`: no key).
    pub fn route<Q: Part, B: Part, R: JsonSchema, H, T>(
        mut self,
        method: Method,
        path: &str,
        summary: &str,
        scope: Option<Scope>,
        handler: H,
    ) -> Self
    where
        H: Handler<T, Arc<Server>>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone()).expect("an HTTP method axum routes");
        self.router = self.router.route(path, bounded(false, on(filter, handler)));
        let query = Q::schema(&mut self.inline);
        let body = B::schema(&mut self.generator);
        let answer = self.generator.subschema_for::<R>();
        self.document(&method, path, summary, scope, query, body, answer);
        self
    }

    /// Routes and documents the typed operation `op` (`baton_app::ops`) under `prefix`:
    /// its route, its input (the path's fields, the rest the body) and its answer are its
    /// declaration's, and its handler is the one every typed operation shares
    /// ([`crate::routes::dispatch`]).
    pub fn operation(mut self, prefix: &str, op: &'static Operation) -> Self {
        let declared = op.typed.expect("a typed operation");
        let path = format!("{prefix}{}", declared.route.path);
        let method = match declared.route.method {
            ops::Method::Get => Method::GET,
            ops::Method::Post => Method::POST,
        };
        let handler = move |axum::extract::State(server): axum::extract::State<Arc<Server>>,
                            request: axum::extract::Request| {
            crate::routes::dispatch(op, server, request)
        };
        let filter = MethodFilter::try_from(method.clone()).expect("an HTTP method axum routes");
        self.router = self
            .router
            .route(&path, bounded(op.waits, on(filter, handler)));
        // The path's fields are not the body's (or the query's).
        let params: Vec<&str> = declared.route.params().collect();
        let inline = |generator: &mut SchemaGenerator| {
            let mut input = declared.call.input(generator);
            if let Some(Value::Object(properties)) = input.get_mut("properties") {
                properties.retain(|name, _| !params.contains(&name.as_str()));
            }
            if let Some(Value::Array(required)) = input.get_mut("required") {
                required.retain(|name| !params.iter().any(|p| name == p));
            }
            input
        };
        let (query, body) = match declared.route.method {
            ops::Method::Get => (Some(inline(&mut self.inline)), None),
            ops::Method::Post if params.is_empty() => {
                (None, Some(declared.call.input(&mut self.generator)))
            }
            ops::Method::Post => (None, Some(inline(&mut self.inline))),
        };
        let answer = declared.call.output(&mut self.generator);
        self.document(
            &method,
            &path,
            declared.summary,
            Some(op.scope()),
            query,
            body,
            answer,
        );
        self
    }

    #[allow(clippy::too_many_arguments)]
    fn document(
        &mut self,
        method: &Method,
        path: &str,
        summary: &str,
        scope: Option<Scope>,
        query: Option<Schema>,
        body: Option<Schema>,
        answer: Schema,
    ) {
        let mut parameters: Vec<Value> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        if let Some(query) = query {
            let query = query.as_value();
            let required: Vec<&str> = query["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(Value::Object(properties)) = query.get("properties") {
                for (name, schema) in properties {
                    parameters.push(json!({
                        "name": name,
                        "in": "query",
                        "required": required.contains(&name.as_str()),
                        "schema": schema,
                    }));
                }
            }
        }
        let mut operation = json!({
            "summary": summary,
            "parameters": parameters,
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {
                    "schema": answer
                }}},
                "default": {"description": "An error: its `code` is stable, its status follows from it", "content": {"application/json": {
                    "schema": self.generator.subschema_for::<ErrorBody>()
                }}},
            },
        });
        if let Some(body) = body {
            operation["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": body}},
            });
        }
        if let Some(scope) = scope {
            operation["security"] = json!([{"bearer": []}]);
            operation["x-baton-scope"] = json!(scope.as_str());
        }
        let entry = self
            .paths
            .entry(path.to_owned())
            .or_insert_with(|| json!({}));
        entry[method.as_str().to_lowercase()] = operation;
    }

    /// The router, and the OpenAPI document of every route registered.
    pub fn finish(mut self) -> (Router<Arc<Server>>, Value) {
        let schemas: Map<String, Value> =
            self.generator.take_definitions(true).into_iter().collect();
        let document = json!({
            "openapi": "3.1.0",
            "info": {
                "title": "Baton",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "The handoff layer for AI agents: durable inboxes, typed handoffs and an append-only log, per project. Every request under /v1/projects/{project} carries `Authorization: Bearer TOKEN` (`baton key issue`); the key names the participant.",
            },
            "paths": self.paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            },
        });
        (self.router, document)
    }
}
