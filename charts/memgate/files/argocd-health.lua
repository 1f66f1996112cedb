-- Argo CD health of memgate.io objects (MemoryProvider, DialectPreset, MemoryGateway), from the
-- conditions the operator writes, which follow the kstatus convention: Ready, plus Reconciling and
-- Stalled (abnormal-true, at most one True) and status.observedGeneration.
--
--   Healthy      Ready=True
--   Suspended    Ready=True with reason Disabled (spec.enabled: false: nothing to serve, as asked)
--   Degraded     Stalled=True (a person must act; the message says what)
--   Progressing  Reconciling=True, no status yet, or a generation the operator has not seen yet
--
-- Argo CD runs resource customizations in gopher-lua (Lua 5.1) without the standard libraries
-- (no string.*, math.*, os): this script uses none of them.
local health = { status = "Progressing", message = "waiting for the memgate operator" }

local function condition(conditions, type)
  if conditions == nil then return nil end
  for _, c in ipairs(conditions) do
    if c.type == type then return c end
  end
  return nil
end

local function say(c, default)
  if c ~= nil and c.message ~= nil and c.message ~= "" then return c.message end
  return default
end

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  health.message = "being deleted"
  return health
end
if obj.status == nil then
  return health
end
local observed = obj.status.observedGeneration
if obj.metadata.generation ~= nil and (observed == nil or observed ~= obj.metadata.generation) then
  health.message = "waiting for the operator to observe the latest spec"
  return health
end

local conditions = obj.status.conditions
local ready = condition(conditions, "Ready")
local stalled = condition(conditions, "Stalled")
local reconciling = condition(conditions, "Reconciling")

if stalled ~= nil and stalled.status == "True" then
  health.status = "Degraded"
  health.message = say(stalled, "stalled")
  return health
end
if reconciling ~= nil and reconciling.status == "True" then
  health.message = say(reconciling, "reconciling")
  return health
end
if ready ~= nil and ready.status == "True" then
  if ready.reason == "Disabled" then
    health.status = "Suspended"
  else
    health.status = "Healthy"
  end
  health.message = say(ready, "ready")
  return health
end
if ready ~= nil and ready.status == "False" then
  -- Neither waiting nor stalled, yet not ready: an operator older than this script. Say so.
  health.status = "Degraded"
  health.message = say(ready, "not ready")
  return health
end
health.message = say(ready, "waiting for the Ready condition")
return health
