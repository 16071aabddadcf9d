"""Batches: files of requests read and checked (batchfile), queued as jobs and counted (service), their results
(output, files), and the pages and socket that follow them (views, urls, consumers). The pages, /api/batches/
and /v1/batches all call the service; it imports the queue and the job records, nothing of chat or the APIs."""
