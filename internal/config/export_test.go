package config

// EnvNames are the variables FromEnv reads, for the external tests.
func EnvNames() []string {
	var names []string
	for _, s := range lambdaSettings {
		names = append(names, s.env)
	}
	for _, s := range commonSettings {
		names = append(names, s.env)
	}
	return names
}

// DeliveryEnvNames are the variables DeliveryFromEnv reads.
func DeliveryEnvNames() []string {
	var names []string
	for _, s := range deliverySettings {
		names = append(names, s.env)
	}
	return names
}
