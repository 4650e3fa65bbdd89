#include "runtime/api_server.h"

namespace carve {

const char* OpenApiDocument() {
  return R"json({
  "openapi": "3.0.3",
  "info": {"title": "Carve API", "version": "1",
           "description": "GPU scheduling and sharing. Every call but /healthz, /readyz and this document needs 'Authorization: Bearer TOKEN'. Errors are {\"error\": {\"code\", \"message\"}}. A call that changes state returns after its change is committed."},
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "schemas": {
      "Error": {"type": "object", "properties": {"error": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
      "JobSpec": {"type": "object", "additionalProperties": false, "required": ["command"], "properties": {
        "name": {"type": "string"}, "tenant": {"type": "string"}, "project": {"type": "string"}, "queue": {"type": "string"},
        "kind": {"type": "string", "enum": ["training", "inference", "batch", "evaluation", "interactive", "data"]},
        "priority": {"type": "integer"}, "replicas": {"type": "integer", "minimum": 1},
        "priority_class": {"type": "string", "example": "standard"}, "preemptible": {"type": "boolean"},
        "topology": {"type": "string", "enum": ["any", "compact"]},
        "isolation": {"type": "string", "enum": ["enforced", "best-effort"]},
        "resources": {"type": "object", "additionalProperties": false, "properties": {
          "gpus": {"type": "integer", "minimum": 0}, "mode": {"type": "string", "enum": ["exclusive", "shared", "partition"]},
          "gpu_compute": {"type": "string", "example": "30%"}, "gpu_memory": {"type": "string", "example": "10Gi"},
          "profile": {"type": "string", "example": "3g.71gb"}, "gpu_model": {"type": "array", "items": {"type": "string"}},
          "cpu": {"type": "string", "example": "2"}, "memory": {"type": "string", "example": "8Gi"}}},
        "command": {"type": "array", "items": {"type": "string"}}, "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "workdir": {"type": "string"}, "max_runtime": {"type": "string", "example": "2h"}}},
      "Job": {"type": "object", "properties": {"id": {"type": "integer"}, "state": {"type": "string", "enum": ["queued", "scheduled", "running", "succeeded", "failed", "cancelled", "timed-out", "lost", "preempted"]},
        "reason": {"type": "string"}, "name": {"type": "string"}, "spec": {"$ref": "#/components/schemas/JobSpec"}, "replicas": {"type": "array", "items": {"type": "object"}},
        "explanation": {"type": "string"}, "created_us": {"type": "integer"}, "scheduled_us": {"type": "integer"}, "started_us": {"type": "integer"}, "ended_us": {"type": "integer"}}}
    }
  },
  "security": [{"bearer": []}],
  "paths": {
    "/healthz": {"get": {"security": [], "summary": "Liveness", "responses": {"200": {"description": "alive"}}}},
    "/readyz": {"get": {"security": [], "summary": "Readiness (503 after a store failure)", "responses": {"200": {"description": "ready"}, "503": {"description": "not ready: {status, reason}; after a failed store commit every authenticated call answers 503 too, until a restart"}}}},
    "/api/v1/jobs": {
      "post": {"summary": "Submit a job; refused (400, with why) when no registered node could hold it even with the cluster idle, unless allow_unschedulable=true", "parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}, "description": "A repeat with the same key returns the first job"}, {"name": "allow_unschedulable", "in": "query", "schema": {"type": "boolean"}}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobSpec"}}}},
        "responses": {"201": {"description": "queued", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}, "400": {"description": "invalid", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}, "401": {"description": "no or bad token"}}},
      "get": {"summary": "List active jobs (all=true: every job), in id order; with limit, one page (after: the id to continue after; a Link header rel=next names the next page), without, the whole list streamed", "parameters": [{"name": "all", "in": "query", "schema": {"type": "boolean"}}, {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}}, {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000}}, {"name": "state", "in": "query", "schema": {"type": "string"}, "description": "comma-separated job states"}, {"name": "user", "in": "query", "schema": {"type": "string"}}, {"name": "tenant", "in": "query", "schema": {"type": "string"}}, {"name": "project", "in": "query", "schema": {"type": "string"}}, {"name": "queue", "in": "query", "schema": {"type": "string"}}, {"name": "node", "in": "query", "schema": {"type": "string"}}, {"name": "name", "in": "query", "schema": {"type": "string"}, "description": "exact, or a prefix ending in *"}, {"name": "since", "in": "query", "schema": {"type": "integer"}, "description": "submitted at or after (microseconds)"}], "responses": {"200": {"description": "jobs"}, "400": {"description": "after, limit, state or since is not valid"}}}},
    "/api/v1/jobs/cancel": {"post": {"summary": "Cancel several jobs in one commit: {ids: [..], filter: {state|states, user, tenant, project, queue, node, name, since}}; answers {cancelled, refused: [{id, reason}], more} (at most 10000 per call)", "responses": {"200": {"description": "what was cancelled and refused"}, "400": {"description": "invalid"}}}},
    "/api/v1/jobs/{id}": {"get": {"summary": "One job", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}], "responses": {"200": {"description": "job"}, "404": {"description": "no such job"}}}},
    "/api/v1/queues/status": {"get": {"summary": "Per queue and resource: quota, used, borrowed, lent, borrowable; pending and running jobs", "responses": {"200": {"description": "queues"}}}},
    "/api/v1/jobs/{id}/explain": {"get": {"summary": "Why the job waits, or where it was placed", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}], "responses": {"200": {"description": "explanation"}}}},
    "/api/v1/jobs/{id}/cancel": {"post": {"summary": "Cancel: stops every process of the job", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}], "responses": {"200": {"description": "cancelling"}, "409": {"description": "already ended"}}}},
    "/api/v1/jobs/{id}/renew": {"post": {"summary": "Renew a running job's lease (interactive jobs hold one; unrenewed, the job is stopped)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}], "responses": {"200": {"description": "renewed"}, "409": {"description": "no lease, or not running"}}}},
    "/api/v1/jobs/{id}/logs": {"get": {"summary": "Replica output: at most limit bytes (default 1 MiB, at most 16 MiB) from offset; header X-Carve-Log-Size is the stored log's full size (page by offset)", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}, {"name": "replica", "in": "query", "schema": {"type": "integer"}}, {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}}, {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 16777216, "default": 1048576}}], "responses": {"200": {"description": "text/plain"}, "400": {"description": "offset, replica or limit is not a non-negative integer, or limit is over 16 MiB"}}}},
    "/api/v1/nodes": {"get": {"summary": "Nodes with their GPUs and state", "responses": {"200": {"description": "nodes"}}}},
    "/api/v1/version": {"get": {"summary": "The server's version (agents' versions are on their nodes)", "responses": {"200": {"description": "{version, kernel}"}}}},
    "/api/v1/jobs/{id}/scale": {"post": {"summary": "Set a running service's (recovery failover) replica count; removed replicas are stopped and reclaimed with evidence while the rest serve", "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1, "maximum": 1000}}}}}}, "responses": {"200": {"description": "the job"}, "400": {"description": "bad replica count"}, "409": {"description": "not a running service"}}}},
    "/api/v1/nodes/{name}/dead": {"post": {"summary": "Declare a silent node dead: its jobs are lost (if not yet) and its fenced devices released on the admin's word", "responses": {"200": {"description": "the node"}, "409": {"description": "the node is heartbeating"}}}},
    "/api/v1/nodes/{name}/maintenance": {"post": {"summary": "Plan a maintenance window ({starts_in, lasts, reason}) or cancel it ({cancel: true}): before it only jobs that end in time land on the node; during it the node is drained", "responses": {"200": {"description": "the node"}, "400": {"description": "bad durations"}}}},
    "/api/v1/nodes/{name}/gpus/{gpu}/layout": {"post": {"summary": "Planned MIG re-layout of one GPU: drain it, verify reclamation, apply the layout, verify it, return it to service", "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"layout": {"type": "array", "items": {"type": "string", "description": "profile@start, or a profile to place in the first free slot"}}}}}}}, "responses": {"200": {"description": "the re-layout record (phase draining)"}, "400": {"description": "not a valid layout for the model"}, "409": {"description": "a re-layout is already in progress"}}}},
    "/api/v1/nodes/{name}/{action}": {"post": {"summary": "cordon (no new work), drain (cordon and move its jobs by their recovery policy) or uncordon a node", "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["cordon", "uncordon", "drain"]}}], "responses": {"200": {"description": "the node"}, "404": {"description": "no such node"}}}},
    "/api/v1/apply": {"post": {"summary": "Apply tenant, project, queue and node documents, all or nothing", "responses": {"200": {"description": "applied"}, "400": {"description": "invalid; nothing applied"}}}},
    "/api/v1/events/{seq}": {"get": {"summary": "One event; a fault's details list the jobs, queues and tenants it touched", "parameters": [{"name": "seq", "in": "path", "required": true, "schema": {"type": "integer"}}], "responses": {"200": {"description": "the event"}, "404": {"description": "no such event"}}}},
    "/api/v1/events": {"get": {"summary": "The hash-chained event log: `limit` events after `after` are read, then narrowed to what the caller may see and to job/type (prefix)/since_us; the header X-Carve-Scanned-To names the last sequence read (continue after it)", "parameters": [{"name": "after", "in": "query", "schema": {"type": "integer"}}, {"name": "limit", "in": "query", "schema": {"type": "integer"}}, {"name": "job", "in": "query", "schema": {"type": "integer"}}, {"name": "type", "in": "query", "schema": {"type": "string"}}, {"name": "since_us", "in": "query", "schema": {"type": "integer"}}], "responses": {"200": {"description": "events"}}}},
    "/api/v1/whoami": {"get": {"summary": "The caller: name, role, tenant, project, token id", "responses": {"200": {"description": "principal"}}}},
    "/api/v1/users": {"post": {"summary": "Create a user {name, role: admin|tenant-admin|member|viewer, tenant, project} (admin; tenant-admin in its tenant)", "responses": {"201": {"description": "user"}, "400": {"description": "invalid"}, "403": {"description": "not allowed"}}},
      "get": {"summary": "Users the caller may see", "responses": {"200": {"description": "users"}}}},
    "/api/v1/users/{name}/remove": {"post": {"summary": "Remove a user and revoke its tokens", "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "removed"}, "404": {"description": "no such user (or not yours)"}}}},
    "/api/v1/tokens": {"post": {"summary": "Create a token {user, expires_in: 30d, description}; the secret is in this response only", "responses": {"201": {"description": "token with its secret"}}},
      "get": {"summary": "Tokens the caller may see (never secrets)", "responses": {"200": {"description": "tokens"}}}},
    "/api/v1/tokens/{id}/revoke": {"post": {"summary": "Revoke a token", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "revoked"}, "404": {"description": "no such token (or not yours)"}}}},
    "/api/v1/audit": {"get": {"summary": "Audit records, streamed (admin; tenant-admin: its tenant)", "parameters": [{"name": "tenant", "in": "query", "schema": {"type": "string"}}, {"name": "since_us", "in": "query", "schema": {"type": "integer"}}, {"name": "until_us", "in": "query", "schema": {"type": "integer"}}, {"name": "format", "in": "query", "schema": {"type": "string", "enum": ["jsonl", "csv", "json"]}}], "responses": {"200": {"description": "records"}}}},
    "/api/v1/audit/verify": {"get": {"summary": "Verify the whole hash chain (admin): {ok, events, head_seq, head_hash, error}", "responses": {"200": {"description": "result"}}}},
    "/api/v1/usage": {"get": {"summary": "Usage grouped by tenant|project|queue|kind|model|user", "parameters": [{"name": "by", "in": "query", "schema": {"type": "string"}}, {"name": "since_us", "in": "query", "schema": {"type": "integer"}}, {"name": "until_us", "in": "query", "schema": {"type": "integer"}}], "responses": {"200": {"description": "rows"}}}},
    "/api/v1/usage/records": {"get": {"summary": "One usage record per job attempt", "parameters": [{"name": "format", "in": "query", "schema": {"type": "string", "enum": ["json", "jsonl", "csv"]}}], "responses": {"200": {"description": "records"}}}},
    "/api/v1/utilization": {"get": {"summary": "The utilization matrix per pool and model (admin); see docs/utilization.md", "responses": {"200": {"description": "matrix"}}}},
    "/metrics": {"get": {"summary": "Prometheus text metrics (admin; tenant-admin: its jobs)", "responses": {"200": {"description": "text/plain"}}}},
    "/api/v1/nodes/{name}/credential/revoke": {"post": {"summary": "Admins: revoke a node's credential so the join token may register the name again", "responses": {"200": {"description": "the revoked credential ids"}, "404": {"description": "the node holds no credential"}}}},
    "/api/v1/agents/register": {"post": {"summary": "Agent: register a node and its GPUs. The join token registers a node that holds no credential yet and binds its node credential: the one whose SHA-256 node_credential_sha256 names (made and saved by the agent first), or else one made by the server (node_token, shown once); the answer names its id (node_credential). A node credential registers its own node only", "responses": {"200": {"description": "registered"}, "400": {"description": "node_credential_sha256 is not a SHA-256, or is already a token's"}, "403": {"description": "the node is already joined, or the credential belongs to another node"}}}},
    "/api/v1/agents/heartbeat": {"post": {"summary": "Agent: report replicas; get assignments and stops (node credential, as its own node only)", "responses": {"200": {"description": "assignments"}, "403": {"description": "a join token, or another node's name"}}}},
    "/api/v1/agents/logs": {"post": {"summary": "Agent: append replica output at an offset (node credential; only replicas that ran on its node); bytes past the server's --max-log-bytes are dropped and the replica's record says log_truncated_at", "responses": {"200": {"description": "appended"}, "404": {"description": "no such replica on this node"}}}}
  }
})json";
}

}  // namespace carve
