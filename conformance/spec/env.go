package spec

// EnvRequireDocker, when "1", makes an unavailable L2 runtime an error
// instead of a skip (CI sets it). It is here, not with the runner, because
// the plugin test kit reads it too.
const EnvRequireDocker = "FLUFFY_REQUIRE_DOCKER"
