from kmscli.main import app

app(prog_name="kms")
