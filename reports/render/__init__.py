"""Reports as a person or a tool reads them: terminal, Markdown, HTML, one line, the node
table and the topology matrix. Text from other nodes is made inert here."""
