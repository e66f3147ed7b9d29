#compdef kms

_kms_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _KMS_COMPLETE=complete_zsh kms)
}

compdef _kms_completion kms
