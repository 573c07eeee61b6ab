-- GET /v1/approvals?status=pending: a tenant's parked calls, paged by id.
CREATE INDEX tool_calls_tenant_status ON tool_calls (tenant_id, project_id, status, id);
