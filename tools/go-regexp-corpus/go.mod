module admission-webhooks/tools/go-regexp-corpus

go 1.26.0
