"""Batches: files of requests read and checked (batchfile), queued as jobs (batches), their results
(output), and the pages and socket that follow them."""
