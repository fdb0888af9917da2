"""The OpenAPI 3.1 document served at ``/openapi.json``, written by hand to match ``app.py``.

The request schemas say what the server accepts: a schema-valid request is never refused for
its shape, and the limits (message length, texts per batch) are the running server's.
"""

from __future__ import annotations

from typing import Any

from nlu_engine import __version__


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, ref: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}},
    }


_SECURED = [{"TokenQuery": []}, {"BearerAuth": []}]
_AUTH_ERROR = _error(
    "Missing or wrong token / JWT (only when the server runs with --auth-token or --jwt-secret)"
)
_NO_MODEL = _error("No model is loaded")
_SLOW_BODY = _error("The body took longer than --body-timeout to arrive (the connection is closed)")
# sender_id, message_id: any JSON; a string or number is stored by serve --log-messages, anything
# else is stored as null
_IDENTIFIER: dict[str, Any] = {}
# the body's token: any JSON; only a string can be the token
_BODY_TOKEN: dict[str, Any] = {}
#: seconds since the epoch a message's ``time`` may be: years 1 to 9999, as Python's datetime
EARLIEST_TIME, LATEST_TIME = -62_135_596_800, 253_402_300_799
TIME: dict[str, Any] = {"anyOf": [
    {"type": "null"},
    {"type": "number", "minimum": EARLIEST_TIME, "maximum": LATEST_TIME},
    {"type": "string", "format": "date-time"},
    {"type": "string", "pattern": r"^[0-9]{1,11}(\.[0-9]{1,9})?$"},
]}
# A model_file the server may accept: a .tar.gz name relative to the models folder (not
# absolute, no '..' segment), not a URL, no NUL character.
MODEL_FILE_PATTERN = r"^(?!.*://)(?!/)(?!(?:.*/)?\.\.(?:/|$))[^\u0000]*\.tar\.gz$"


def openapi_document(max_text_chars: int = 2_000, max_batch_texts: int = 1_000) -> dict[str, Any]:
    """The API description (paths, request and response schemas, security schemes).

    ``max_text_chars`` and ``max_batch_texts`` are the server's limits (413 beyond them).
    """
    text = {"type": "string", "maxLength": max_text_chars}
    texts = {"type": "array", "maxItems": max_batch_texts, "items": text}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "nlu_engine HTTP API",
            "version": __version__,
            "description": (
                "Intent classification and entity extraction, compatible with the NLU part of "
                "`rasa run --enable-api`. Errors are JSON objects with status 'failure'. With "
                "--auth-token or --jwt-secret every endpoint but /, /version, /health and "
                "/openapi.json needs the token; those four are open (this document holds no secret). "
                "A method a path does not support answers 405 with an Allow header."
            ),
        },
        "paths": {**_service_paths(), **_parse_paths(text, texts), "/model": _model_path()},
        "components": {
            "securitySchemes": _security_schemes(),
            "schemas": {**_request_schemas(text), **_result_schemas()},
        },
    }


def _service_paths() -> dict[str, Any]:
    """Greeting, versions, health, this document (all open) and the model status."""
    return {
    "/": {
        "get": {
            "summary": "Hello and version",
            "responses": {
                "200": {
                    "description": "A greeting",
                    "content": {"text/plain": {"schema": {
                        "type": "string", "example": f"Hello from nlu_engine: {__version__}"}}},
                }
            },
        }
    },
    "/version": {
        "get": {
            "summary": "Engine version and the oldest model version it loads",
            "responses": {"200": _json("Versions", "Version")},
        }
    },
    "/health": {
        "get": {
            "summary": "Liveness and readiness (no authentication)",
            "responses": {"200": _json("A model is loaded", "Health"),
                          "503": _json("No model is loaded", "Health")},
        }
    },
    "/openapi.json": {
        "get": {
            "summary": "This document",
            "responses": {"200": {"description": "OpenAPI 3.1 document",
                                  "content": {"application/json": {"schema": {"type": "object"}}}}},
        }
    },
    "/status": {
        "get": {
            "summary": "The loaded model",
            "security": _SECURED,
            "responses": {"200": _json("Model status", "Status"), "401": _AUTH_ERROR,
                          "503": _NO_MODEL},
        }
    },
    }


def _parse_paths(text: dict[str, Any], texts: dict[str, Any]) -> dict[str, Any]:
    """Parsing one message and a batch; ``text`` and ``texts`` carry the server's limits."""
    return {
    "/model/parse": {
        "post": {
            "summary": "Parse one message (intent and entities)",
            "security": _SECURED,
            "parameters": [
                {"name": "emulation_mode", "in": "query", "required": False,
                 "description": "Only 'rasa' (the default, any case) is supported; other values "
                                "answer 400",
                 "schema": {"type": "string", "pattern": "^([Rr][Aa][Ss][Aa])?$"}},
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("ParseRequest")}},
            },
            "responses": {
                "200": _json("The parse result, as `nlu-engine parse` prints it", "ParseResult"),
                "400": _error("Invalid JSON, or 'text' missing or not a string"),
                "401": _AUTH_ERROR,
                "408": _SLOW_BODY,
                "413": _error("Body over the size limit, or 'text' over the character limit"),
                "503": _NO_MODEL,
            },
        }
    },
    "/model/parse/batch": {
        "post": {
            "summary": "Parse a list of messages as one batch",
            "security": _SECURED,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"oneOf": [
                    texts,
                    {"type": "object", "required": ["texts"],
                     "properties": {"texts": texts, "token": _BODY_TOKEN,
                                    "sender_id": {**_IDENTIFIER,
                                                  "description": "Stored with each parse by "
                                                                 "serve --log-messages"}}},
                ]}}},
            },
            "responses": {
                "200": {
                    "description": "One parse result per text, in order",
                    "content": {"application/json": {"schema": {
                        "type": "array", "items": {"$ref": "#/components/schemas/ParseResult"}}}},
                },
                "400": _error("Invalid JSON, or not a list of strings"),
                "401": _AUTH_ERROR,
                "408": _SLOW_BODY,
                "413": _error("Body, number of texts or a text over its limit"),
                "503": _NO_MODEL,
            },
        }
    },
    }


def _model_path() -> dict[str, Any]:
    """Loading (PUT) and unloading (DELETE) the model."""
    return {
    "put": {
        "summary": "Replace the loaded model by an archive from the server's models folder",
        "description": (
            "Requests keep being answered (by the old model) while the new one loads. With "
            "several workers, the one that receives the request loads the archive and the "
            "others follow within about a second. "
            "The archive may use registered components, and custom ones only if the "
            "server was started allowing them (--allow-component, --config)."
        ),
        "security": _SECURED,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref("ModelRequest")}},
        },
        "responses": {
            "204": {"description": "The new model is loaded and answers from now on"},
            "400": _error(
                "Invalid request, a path outside the models folder, or an archive that "
                "cannot be loaded (unreadable, or naming a component not allowed)"
            ),
            "401": _AUTH_ERROR,
            "404": _error("No such archive in the models folder"),
            "408": _SLOW_BODY,
            "409": _error("Reloading is unavailable (no models folder)"),
            "413": _error("Body over the size limit"),
        },
    },
    "delete": {
        "summary": "Unload the model (parse answers 503 until PUT /model)",
        "security": _SECURED,
        "responses": {"204": {"description": "Unloaded"}, "401": _AUTH_ERROR,
                      "409": _error("Unavailable with several workers")},
    },
    }


def _security_schemes() -> dict[str, Any]:
    return {
    "TokenQuery": {"type": "apiKey", "in": "query", "name": "token",
                   "description": "The --auth-token value, as Rasa"},
    "BearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "The --auth-token value, or an HS256 JWT signed with --jwt-secret",
    },
    }


#: ``/status``'s ``message_log`` block
MESSAGE_LOG_STATUS: dict[str, Any] = {
    "type": "object",
    "description": "serve --log-messages, for the worker that answered: whether it "
                   "is on, and its rows written, dropped, queued and pruned",
    "required": ["enabled"],
    "properties": {
        "enabled": {"type": "boolean"},
        "database": {"type": "string"},
        "rows_written": {"type": "integer"},
        "rows_dropped": {"type": "integer"},
        "rows_queued": {"type": "integer"},
        "rows_pruned": {"type": "integer"},
        "writing": {"type": "boolean", "description": "false while the database cannot be written"},
        "error": {"type": ["string", "null"]},
    },
}


#: what the service endpoints answer (/version, /health, /status)
SERVICE_SCHEMAS: dict[str, Any] = {
    "Version": {
        "type": "object",
        "required": ["version", "minimum_compatible_version"],
        "properties": {"version": {"type": "string"},
                       "minimum_compatible_version": {"type": "string"}},
    },
    "Health": {
        "type": "object",
        "required": ["status", "model_loaded"],
        "properties": {"status": {"type": "string", "enum": ["ok", "no model"]},
                       "model_loaded": {"type": "boolean"}},
    },
    "Status": {
        "type": "object",
        "required": ["model_file", "model_id", "num_active_training_jobs"],
        "properties": {
            "model_file": {"type": "string", "description": "Archive name in the models folder"},
            "model_id": {"type": "string"},
            "num_active_training_jobs": {"type": "integer", "description": "Always 0"},
            "version": {"type": "string"},
            "trained_at": {"type": ["string", "null"]},
            "pipeline": {"type": "array", "items": {"type": "string"}},
            "uptime_seconds": {"type": "number"},
            "worker_id": {"type": "string",
                          "description": "The process that answered (host:pid, or a Ray Serve replica)"},
            "batching": {
                "type": "object",
                "properties": {"requests": {"type": "integer"}, "batches": {"type": "integer"},
                               "largest_batch": {"type": "integer"}},
            },
            "message_log": MESSAGE_LOG_STATUS,
        },
    },
}


def _request_schemas(text: dict[str, Any]) -> dict[str, Any]:
    """What the requests send and the service endpoints answer."""
    return {
    **SERVICE_SCHEMAS,
    "ParseRequest": {
        "type": "object",
        "required": ["text"],
        "properties": {
            "text": {**text, "example": "book a table for two in Berlin"},
            "message_id": {**_IDENTIFIER,
                           "description": "Stored with the parse by serve --log-messages; "
                                          "otherwise not used"},
            "sender_id": {**_IDENTIFIER,
                          "description": "Stored with the parse by serve --log-messages; "
                                         "otherwise not used"},
            "time": {**TIME, "example": 1700000000,
                     "description": "When the message was sent (Rasa's field): seconds since the "
                                    "epoch (years 1 to 9999) or an ISO 8601 date-time; Duckling reads "
                                    "relative dates against it (default: now)"},
            "token": {**_BODY_TOKEN,
                      "description": "The --auth-token value, where Rasa's dialogue server sends it "
                                     "(endpoints.yml `nlu: token:`); ?token= and Bearer work too"},
        },
    },
    "ModelRequest": {
        "type": "object",
        "required": ["model_file"],
        "properties": {
            "model_file": {"type": "string", "minLength": 1, "pattern": MODEL_FILE_PATTERN,
                           "description": "Name (or relative path) of a .tar.gz inside the "
                                          "models folder"},
            "model_server": {"type": "null", "description": "Not supported (400 when set)"},
            "remote_storage": {"type": "null", "description": "Not supported (400 when set)"},
        },
    },
    }


def _result_schemas() -> dict[str, Any]:
    """A parse result and an error."""
    return {
    "Intent": {
        "type": "object",
        "required": ["name", "confidence"],
        "properties": {"name": {"type": ["string", "null"]}, "confidence": {"type": "number"},
                       "full_retrieval_intent_name": {"type": "string"}},
    },
    "Entity": {
        "type": "object",
        "required": ["entity", "start", "end", "value"],
        "properties": {
            "entity": {"type": "string"},
            "start": {"type": "integer"},
            "end": {"type": "integer"},
            "value": {},
            "confidence_entity": {"type": "number"},
            "role": {"type": "string"},
            "confidence_role": {"type": "number"},
            "group": {"type": "string"},
            "confidence_group": {"type": "number"},
            "extractor": {"type": "string"},
            "processors": {"type": "array", "items": {"type": "string"}},
        },
    },
    "ParseResult": {
        "type": "object",
        "required": ["text", "intent", "entities"],
        "properties": {
            "text": {"type": "string"},
            "intent": {"$ref": "#/components/schemas/Intent"},
            "entities": {"type": "array", "items": {"$ref": "#/components/schemas/Entity"}},
            "text_tokens": {"type": "array", "description": "[start, end] of each token",
                            "items": {"type": "array", "items": {"type": "integer"},
                                      "minItems": 2, "maxItems": 2}},
            "intent_ranking": {"type": "array", "items": {"$ref": "#/components/schemas/Intent"}},
            "response_selector": {"type": "object"},
            "language": {"type": "object", "required": ["name", "confidence"],
                         "description": "The message's language, when the pipeline has a "
                                        "LanguageIdentifier: an ISO 639-1 code, or 'unknown'",
                         "properties": {"name": {"type": "string"},
                                        "confidence": {"type": "number"}}},
        },
    },
    "Error": {
        "type": "object",
        "required": ["status", "message", "reason", "code"],
        "properties": {
            "version": {"type": "string"},
            "status": {"type": "string", "enum": ["failure"]},
            "message": {"type": "string"},
            "reason": {"type": "string"},
            "details": {"type": "object"},
            "help": {"type": ["string", "null"]},
            "code": {"type": "integer"},
        },
    },
    }
