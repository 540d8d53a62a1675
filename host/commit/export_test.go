package commit

// Test helpers shared with the external tests (package commit_test), which
// exist because they start a real kernel (internal/kerneltest imports
// host/kernel, which imports this package).
var (
	NewRepo       = newRepo
	Gitc          = gitc
	Write         = write
	UserChanges   = userChanges
	MergedRequest = mergedRequest
	CheckLanded   = checkLanded
)
