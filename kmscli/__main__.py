from kmscli.entry import entry

entry()
